"""Editor support for .hcq programs (docs/editor.md): highlighting generated from the grammar, and the language
server (`hcqdsl lsp`)."""
