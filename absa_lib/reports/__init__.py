"""Reports: the paper's numbers beside ours, as tables and figures.

    paper_numbers   the values printed in the paper's Tables 1-2 (for the side-by-side tables)
    tables          a table of runs: seeds as mean +- sd, dev-selected and test-selected, trivial rows
    variant_tables  tables of the ablations and the other attention systems
    summary         ``absa summary``: every run of a folder, grouped into rows
    plateau         the spread of the selected epoch (how flat each run's dev curve is)
    figure_data     the numbers behind Figures 3-5 and the training curves
    plots           matplotlib figures from those numbers (no model needed)
    data_overview   the data notebook's counts and examples
    compare         ``absa compare``: two configurations seed by seed, each metric with a verdict
    claims          the paper's claims measured (training failures and budgets apart)
    model_card      ``absa export``: a run's model as a folder that predicts alone, with its card
"""

PROTOCOL_LABELS = {  # the selection protocols a report can show; here, with no pandas, for `absa summary --help`
    "dev_best": "dev-best (default: epoch chosen on the dev split)",
    "test_best": "test-best (official code's protocol: epoch chosen on the test set, optimistic)",
    "last": "last epoch",
}
