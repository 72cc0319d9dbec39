" Filetype detection for the dtf model language (.dtf files).
autocmd BufRead,BufNewFile *.dtf setfiletype dtf
