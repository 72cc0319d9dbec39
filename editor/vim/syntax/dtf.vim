" Vim syntax file
" Language:    dtf model language (grammar/Dtf.g4)
" Filenames:   *.dtf
" The VS Code grammar (editor/vscode/syntaxes/dtf.tmLanguage.json) colours the same
" token classes; keep the builtin lists of the two in step (tests/editor checks it).

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn case match
syn sync minlines=50

" Reserved words of the lexer; `placement` is matched below, by context.
syn keyword dtfKeyword     graph train
syn keyword dtfKeyword     model nextgroup=dtfModelName skipwhite
syn keyword dtfKeyword     network nextgroup=dtfNetworkName skipwhite
syn keyword dtfKeyword     input nextgroup=dtfInputName skipwhite
syn keyword dtfKeyword     var nextgroup=dtfVarName skipwhite
syn keyword dtfKeyword     on nextgroup=dtfOnDevice skipwhite skipempty
syn keyword dtfKeyword     as shares nextgroup=dtfLayerName skipwhite
syn keyword dtfStatement   return
syn keyword dtfType        f32 f64 f16 bf16 i32 i64 bool
syn keyword dtfBoolean     true false
syn keyword dtfNone        none

syn match dtfModelName     contained "\h\w*"
syn match dtfNetworkName   contained "\h\w*"
syn match dtfInputName     contained "\h\w*"
syn match dtfVarName       contained "\h\w*"
syn match dtfLayerName     contained "\h\w*"

" placement is a keyword only before a strategy (it is a name elsewhere).
syn match dtfKeyword       "\<placement\>\ze\s\+\h" nextgroup=dtfPlacementStrategy skipwhite
syn match dtfPlacementStrategy contained "\<\h\w*\>\%(\s*(\)\@!"

" checkpoint every 600 s keep 5 / summary every 100 steps [loss, accuracy]
syn match dtfPolicy        "\<\%(checkpoint\|summary\)\ze\s\+every\>" nextgroup=dtfEvery skipwhite
syn match dtfEvery         contained "\<every\>" nextgroup=dtfPolicyCount skipwhite
syn match dtfPolicyCount   contained "\%(\d\+\%(\.\d*\)\=\|\.\d\+\)\%([eE][+-]\=\d\+\)\=" nextgroup=dtfUnit skipwhite
syn match dtfUnit          contained "\<\h\w*\>" nextgroup=dtfKeep skipwhite
syn match dtfKeep          contained "\<keep\>"

" optimizer for wide, "cross_*" = ftrl(...): `for` is a keyword only after a
" setting's name and before the names of its group.
syn match dtfKeyword       "\%(\<\h\w*\s\+\)\@<=for\>\ze\s\+\%(\h\|\"\)"

" Numbers: 5, 0.1, 5., .5, 1e-4, 1.5E+3. The float is defined last so it wins.
syn match dtfNumber        "\%(\w\|\.\)\@1<!\d\+"
syn match dtfFloat         "\%(\w\|\.\)\@1<!\%(\d\+\.\d*\%([eE][+-]\=\d\+\)\=\|\.\d\+\%([eE][+-]\=\d\+\)\=\|\d\+[eE][+-]\=\d\+\)"

syn match dtfOperator      "[-+*/%@]\|[=!<>]=\|[<>=]"

" Calls: any name before `(`, and the builtins (also as a value: `= zeros`).
syn match dtfCall          "\<\h\w*\ze\s*("
syn match dtfBuiltin       "\<\%(dense\|conv2d\|embedding\|layer_norm\|batch_norm\|multi_head_attention\|lstm\|gru\|matmul\|relu\|sigmoid\|tanh\|exp\|log\|sqrt\|rsqrt\|gelu\|erf\|floor\|ceil\|round\|abs\|floormod\|bucketize\|maximum\|minimum\|pow\|select\|cast\|reshape\|flatten\|transpose\|concat\|slice\|broadcast_to\|tile\|sum\|mean\|max\|argmax\|softmax\|log_softmax\|softmax_cross_entropy\|sparse_softmax_cross_entropy\|one_hot\|gather\|dropout\|max_pool\|avg_pool\|zeros\|ones\|constant\|uniform\|normal\|truncated_normal\|glorot_uniform\|he_normal\|orthogonal\|sgd\|momentum\|adam\|adagrad\|ftrl\|rmsprop\|adamw\|exponential_decay\|piecewise_constant\|cosine_decay\|global_norm\|dynamic\|sync\|session\|idx\|csv\|synthetic\|tfrecord\|replicate\)\>\ze\s*("
syn match dtfBuiltin       "\%(=\s*\)\@20<=\<\%(dense\|conv2d\|embedding\|layer_norm\|batch_norm\|multi_head_attention\|lstm\|gru\|matmul\|relu\|sigmoid\|tanh\|exp\|log\|sqrt\|rsqrt\|gelu\|erf\|floor\|ceil\|round\|abs\|floormod\|bucketize\|maximum\|minimum\|pow\|select\|cast\|reshape\|flatten\|transpose\|concat\|slice\|broadcast_to\|tile\|sum\|mean\|max\|argmax\|softmax\|log_softmax\|softmax_cross_entropy\|sparse_softmax_cross_entropy\|one_hot\|gather\|dropout\|max_pool\|avg_pool\|zeros\|ones\|constant\|uniform\|normal\|truncated_normal\|glorot_uniform\|he_normal\|orthogonal\|sgd\|momentum\|adam\|adagrad\|ftrl\|rmsprop\|adamw\|exponential_decay\|piecewise_constant\|cosine_decay\|global_norm\|dynamic\|sync\|session\|idx\|csv\|synthetic\|tfrecord\|replicate\)\>\%(\s*(\)\@!"
syn match dtfConstant      "\%(=\s*\)\@20<=\<\%(same\|valid\|round_robin\|greedy\|async\|between_graph\|in_graph\|float32\|mixed_bfloat16\|mixed_float16\)\>\%(\s*(\)\@!"

" Keyword arguments: `name =` inside parentheses, or after a comma (`, trainable = false`).
syn region dtfParens       transparent start="(" end=")" contains=TOP,dtfTrailingKwarg
syn match dtfKwarg         contained containedin=dtfParens "\<\h\w*\ze\s*=\%([^=]\|$\)"
syn match dtfTrailingKwarg ",\s*\zs\h\w*\ze\s*=\%([^=]\|$\)"

" f32[B, 784]: the dims after a dtype.
syn region dtfShape        matchgroup=dtfShapeBracket start="\%(\<\%(f32\|f64\|f16\|bf16\|i32\|i64\|bool\)\s*\)\@<=\[" end="\]" contains=dtfBatch,dtfDim,dtfDimName,dtfLineComment,dtfBlockComment
syn match dtfBatch         contained "\<B\>"
syn match dtfDim           contained "\<\d\+\>"
syn match dtfDimName       contained "\<\%(B\>\)\@!\h\w*\>"

" Strings; device names get their own group, with the /job:ps parts picked out.
syn match dtfEscape        contained "\\."
syn region dtfString       start=+"+ skip=+\\.+ end=+"+ end=+$+ contains=dtfEscape
syn region dtfDeviceString start=+"\ze/\%(job:\|replica:\|task:\|device:\|cpu\>\|gpu\>\|CPU\>\|GPU\>\)+ skip=+\\.+ end=+"+ end=+$+ contains=dtfDeviceKey,dtfDeviceSep,dtfDeviceValue,dtfEscape
syn region dtfOnDevice     contained start=+"+ skip=+\\.+ end=+"+ end=+$+ contains=dtfDeviceKey,dtfDeviceSep,dtfDeviceValue,dtfEscape
syn match dtfDeviceSep     contained "[/:]"
syn match dtfDeviceKey     contained "/\@1<=\h\w*"
syn match dtfDeviceValue   contained ":\@1<=\w\+"

" Blocks, for foldmethod=syntax.
syn region dtfBlock        transparent fold start="{" end="}" contains=TOP

" Comments last, so `//` wins over the `/` operator.
syn keyword dtfTodo        contained TODO FIXME XXX NOTE
syn match dtfLineComment   "//.*$" contains=dtfTodo,@Spell
syn region dtfBlockComment start="/\*" end="\*/" contains=dtfTodo,@Spell fold

hi def link dtfKeyword           Keyword
hi def link dtfStatement         Statement
hi def link dtfPolicy            Keyword
hi def link dtfEvery             Keyword
hi def link dtfKeep              Keyword
hi def link dtfUnit              Special
hi def link dtfPolicyCount       Number
hi def link dtfType              Type
hi def link dtfShapeBracket      Delimiter
hi def link dtfBatch             Constant
hi def link dtfDim               Number
hi def link dtfDimName           Identifier
hi def link dtfBoolean           Boolean
hi def link dtfNone              Constant
hi def link dtfConstant          Constant
hi def link dtfPlacementStrategy Constant
hi def link dtfModelName         Identifier
hi def link dtfNetworkName       Function
hi def link dtfInputName         Identifier
hi def link dtfVarName           Identifier
hi def link dtfLayerName         Identifier
hi def link dtfNumber            Number
hi def link dtfFloat             Float
hi def link dtfOperator          Operator
hi def link dtfCall              Identifier
hi def link dtfBuiltin           Function
hi def link dtfKwarg             Special
hi def link dtfTrailingKwarg     Special
hi def link dtfString            String
hi def link dtfEscape            SpecialChar
hi def link dtfDeviceString      String
hi def link dtfOnDevice          String
hi def link dtfDeviceSep         Delimiter
hi def link dtfDeviceKey         Special
hi def link dtfDeviceValue       Constant
hi def link dtfTodo              Todo
hi def link dtfLineComment       Comment
hi def link dtfBlockComment      Comment

let b:current_syntax = "dtf"

let &cpo = s:cpo_save
unlet s:cpo_save
