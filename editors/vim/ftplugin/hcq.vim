" hcqdsl programs: `#` comments, two-space indent (as `hcqdsl fmt` writes them)
if exists("b:did_ftplugin") | finish | endif
let b:did_ftplugin = 1
setlocal commentstring=#\ %s comments=:# shiftwidth=2 softtabstop=2 expandtab
let b:undo_ftplugin = "setlocal commentstring< comments< shiftwidth< softtabstop< expandtab<"
