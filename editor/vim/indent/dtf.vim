" Indentation for the dtf model language: one 'shiftwidth' inside each open brace,
" bracket or parenthesis; a line that starts with a closer lines up with the line
" that opened it. Brackets in strings and comments are skipped (with syntax on).
if exists("b:did_indent")
  finish
endif
let b:did_indent = 1

setlocal autoindent
setlocal nosmartindent nocindent
setlocal indentexpr=GetDtfIndent(v:lnum)
setlocal indentkeys=0{,0},0),0],!^F,o,O

let b:undo_indent = "setlocal autoindent< smartindent< cindent< indentexpr< indentkeys<"

if exists("*GetDtfIndent")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

function! s:SyntaxName(lnum, col) abort
  return synIDattr(synID(a:lnum, a:col, 1), 'name')
endfunction

" True where the cursor sits in a string or a comment, whose brackets do not count.
function! s:SkipHere() abort
  return s:SyntaxName(line('.'), col('.')) =~# 'String\|Device\|Comment\|Escape'
endfunction

function! s:InBlockComment(lnum) abort
  let col = match(getline(a:lnum), '\S') + 1
  return col > 0 && getline(a:lnum) !~# '^\s*/\*'
        \ && s:SyntaxName(a:lnum, col) ==# 'dtfBlockComment'
endfunction

function! GetDtfIndent(lnum) abort
  let line = getline(a:lnum)

  " Inside a block comment: under the text after `/* ` (or under its `*`), then as above.
  if s:InBlockComment(a:lnum)
    let prevline = getline(a:lnum - 1)
    let start = match(prevline, '/\*')
    if start >= 0 && !s:InBlockComment(a:lnum - 1)
      return strdisplaywidth(strpart(prevline, 0, start)) + (line =~# '^\s*\*' ? 1 : 3)
    endif
    return indent(a:lnum - 1)
  endif

  let skip = exists('b:current_syntax') ? 's:SkipHere()' : ''
  let save_cursor = getcurpos()
  try
    " A closer first on the line: line up with the line of its opener.
    let closer = matchstr(line, '^\s*\zs[\])}]')
    if closer !=# ''
      call cursor(a:lnum, match(line, '[\])}]') + 1)
      let opener = {')': '(', ']': '\[', '}': '{'}[closer]
      let [l, c] = searchpairpos(opener, '', escape(closer, ']'), 'bnW', skip, 0, 200)
      if l > 0
        return indent(l)
      endif
    endif
    " Otherwise one level in from the line of the innermost bracket still open.
    call cursor(a:lnum, 1)
    let [l, c] = searchpairpos('[[({]', '', '[\])}]', 'bnW', skip, 0, 200)
    return l > 0 ? indent(l) + shiftwidth() : 0
  finally
    call setpos('.', save_cursor)
  endtry
endfunction

let &cpo = s:cpo_save
unlet s:cpo_save
