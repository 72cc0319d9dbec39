// The dtf model language: models, their inputs, variables, graph, placement and
// training, in one declarative file. See docs/language.md.
grammar Dtf;

file : (model | network)* EOF ;

model : MODEL name=ident '{' modelItem* '}' ;

modelItem
  : inputDecl
  | varDecl
  | placementDecl
  | onBlock
  | graphBlock
  | trainBlock
  | network
  ;

// input x: f32[B, 784]
inputDecl : INPUT name=ident ':' tensorType ;

tensorType : DTYPE '[' (dim (',' dim)*)? ']' ;
dim : INT | ident ;

// var W: f32[784, 500] = truncated_normal(stddev = 0.1), trainable = false, partitions = 4
varDecl : VAR name=ident ':' tensorType ('=' init=expr)? (',' kwarg)* ;

// placement replicate(ps = round_robin)
placementDecl : PLACEMENT strategy=ident ('(' kwargs? ')')? ;

// on "/job:ps/task:0" { ... }
onBlock : ON device=STRING '{' graphItem* '}' ;

graphBlock : GRAPH '{' graphItem* '}' ;

graphItem
  : varDecl
  | onBlock
  | assign
  | returnStmt
  ;

assign : name=ident '=' expr ;
returnStmt : RETURN expr (',' expr)* ;

// network tower(x, units = 10) { ... return y }
network : NETWORK name=ident '(' (param (',' param)*)? ')' '{' graphItem* '}' ;
param : name=ident ('=' expr)? ;

trainBlock : TRAIN '{' trainItem* '}' ;

// optimizer for wide, "cross_*" = ftrl(learning_rate = 0.2): a group's own setting
trainItem
  : key=ident (FOR groupTarget (',' groupTarget)*)? '=' expr (',' kwarg)*  # setting
  | CHECKPOINT EVERY every=number unit=ident (KEEP keep=INT)?              # checkpointPolicy
  | SUMMARY EVERY every=number unit=ident ('[' ident (',' ident)* ']')?    # summaryPolicy
  ;
groupTarget : ident | STRING ;

// Operators bind as in Python: unary minus, then * / % @, then + -, then comparisons.
expr
  : primary                                              # primaryExpr
  | op='-' expr                                          # negExpr
  | lhs=expr op=('*' | '/' | '%' | '@') rhs=expr         # mulExpr
  | lhs=expr op=('+' | '-') rhs=expr                     # addExpr
  | lhs=expr op=('==' | '!=' | '<' | '<=' | '>' | '>=') rhs=expr  # compareExpr
  ;

primary
  : number                                               # numberLit
  | STRING                                               # stringLit
  | (TRUE | FALSE)                                       # boolLit
  | DTYPE                                                # dtypeLit
  | call                                                 # callExpr
  | ident                                                # nameRef
  | '(' expr ')'                                         # parenExpr
  | '[' (expr (',' expr)*)? ']'                          # listLit
  ;

// conv2d(h, filters = 32, kernel = 5) as conv1     (a new layer named conv1)
// tower(x2) shares left                            (reuses left's variables)
call : callee=ident '(' (arg (',' arg)*)? ')' (AS as=ident | SHARES shares=ident)? ;
arg : (key=ident '=')? expr ;
kwargs : kwarg (',' kwarg)* ;
kwarg : key=ident '=' expr ;

number : INT | FLOAT ;

// Words that are keywords only where the grammar expects them, names elsewhere.
ident : ID | CHECKPOINT | SUMMARY | EVERY | KEEP | PLACEMENT | TRAIN | FOR ;

MODEL : 'model' ;
INPUT : 'input' ;
VAR : 'var' ;
GRAPH : 'graph' ;
TRAIN : 'train' ;
ON : 'on' ;
NETWORK : 'network' ;
RETURN : 'return' ;
AS : 'as' ;
SHARES : 'shares' ;
TRUE : 'true' ;
FALSE : 'false' ;
PLACEMENT : 'placement' ;
CHECKPOINT : 'checkpoint' ;
SUMMARY : 'summary' ;
EVERY : 'every' ;
KEEP : 'keep' ;
FOR : 'for' ;

DTYPE : 'f32' | 'f64' | 'f16' | 'bf16' | 'i32' | 'i64' | 'bool' ;

ID : [a-zA-Z_] [a-zA-Z_0-9]* ;
FLOAT : [0-9]+ '.' [0-9]* EXPONENT? | '.' [0-9]+ EXPONENT? | [0-9]+ EXPONENT ;
INT : [0-9]+ ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;
STRING : '"' (~["\\\r\n] | '\\' .)* '"' ;

LINE_COMMENT : '//' ~[\r\n]* -> channel(HIDDEN) ;
BLOCK_COMMENT : '/*' .*? '*/' -> channel(HIDDEN) ;
WS : [ \t\r\n]+ -> channel(HIDDEN) ;
// Anything else becomes a token the parser rejects with a clear message.
ERROR_CHAR : . ;
