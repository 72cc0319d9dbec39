" Filetype settings for the dtf model language: comments, formatting, includes.
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

setlocal commentstring=//\ %s
setlocal comments=s1:/*,mb:*,ex:*/,://
setlocal formatoptions-=t formatoptions+=croql
setlocal suffixesadd=.dtf

let b:undo_ftplugin = "setlocal commentstring< comments< formatoptions< suffixesadd<"
