"""The trainlint language server; `trainlint server` starts it."""
