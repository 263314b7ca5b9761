"""The harness: what runs the notebooks and the grids of runs. Nothing in the science core
(``data``, ``models``, ``evaluation``, ``training``) imports it.

    session          a notebook's set-up: parameters, folders, threads, data; saving its tables
    profiles         the parameter files under params/ and their checks
    grid             which runs make up a table row, an ablation or a comparison; training them
    ablations        the ablation grid (notebook 04)
    runner           ``absa grid``: every run of a profile, as a queue of processes
    notebook_script  a notebook's parameters, for a script
    run_all          run_all.sh's driver: the profile, the data, the grid, and each notebook with its
                     parameters, its line, its error, its readable copy; the manifest
    default_profile  the profile run_all.sh runs when none is named, and why
    manifest         the checksums of every output a notebook wrote
    colab            the notebooks' install cell and "Open in Colab" links, from the declared address
"""
