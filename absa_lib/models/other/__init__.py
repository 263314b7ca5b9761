"""The other attention systems (docs/other_attention.md): ATAE/AE/AT-LSTM (alstm), MAN-BERT (man)
and OA-BERT (orthogonal), on shared encoder helpers (encoders)."""
