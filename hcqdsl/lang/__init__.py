"""Front end: .hcq text ⇄ IR (grammar, the lark parser and the fast scanner, the formatter, the IR dump)."""
