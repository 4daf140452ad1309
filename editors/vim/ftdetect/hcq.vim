" .hcq files are hcqdsl programs
autocmd BufRead,BufNewFile *.hcq setfiletype hcq
