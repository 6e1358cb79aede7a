" vim_ale_check.vim: ALE driving the completer server as a user would.
"
" vim -N -n -u <the doc's vimrc> -i NONE --not-a-term -S tests/vim_ale_check.vim FILE
" Environment: COMPLETER_VIM_CASES (JSON list of {typed, after, keys, omnifunc}), COMPLETER_VIM_OUT (JSON report).
" Once completer/info says the model is loaded: for each case, its text typed on a new last line (`after` behind
" the cursor), `keys` pressed there in insert mode, and once the menu shows (or the server answered and it did
" not), CTRL-Y takes the line shown.  The report holds, for each, the words listed, the line with the menu open
" and after CTRL-Y, and the line count; and the settings the server has at the start and after
" g:ale_python_completer_config changes.

let s:report = {'cases': []}
let s:cases = json_decode($COMPLETER_VIM_CASES)
let s:started = reltime()

function! s:Finish(...) abort
    call writefile([json_encode(s:report)], $COMPLETER_VIM_OUT)
    qall!
endfunction

function! s:Fail(message) abort
    let s:report.error = a:message
    call s:Finish()
endfunction

" completer/info through ALE's connection to the server, until its worker has loaded the model; then Then(info)
function! s:AskInfo(Then, ...) abort
    call ale#lsp_linter#SendRequest(bufnr(''), 'completer', [0, 'completer/info', {}],
    \   function('s:OnInfo', [a:Then]))
endfunction

function! s:OnInfo(Then, response) abort
    let l:info = get(a:response, 'result', {})
    if type(l:info) is v:t_dict && !empty(get(l:info, 'model')) && get(get(l:info, 'server', {}), 'worker_pid')
        call a:Then(l:info)
    elseif reltimefloat(reltime(s:started)) > 60
        call s:Fail('no model after 60 s: ' . json_encode(a:response))
    else
        call timer_start(200, function('s:AskInfo', [a:Then]))
    endif
endfunction

function! s:Ready(info) abort
    let s:report.settings = a:info.server.settings
    call s:NextCase()
endfunction

function! s:NextCase(...) abort
    if empty(s:cases)
        let g:ale_python_completer_config = {'completer': {'beams': 2}}
        return s:AskInfo({info -> s:Changed(info)})
    endif
    let s:case = remove(s:cases, 0)
    if has_key(s:case, 'omnifunc')
        let &l:omnifunc = s:case.omnifunc
    endif
    unlet! b:ale_completion_result
    call append('$', s:case.typed . s:case.after)
    call cursor(line('$'), len(s:case.typed) + 1)
    let s:tries = 0
    call feedkeys((empty(s:case.after) ? 'A' : 'i') . s:case.keys, 'nt')
    call timer_start(50, function('s:WhenMenu'))
endfunction

" The menu, or for ALE's omnifunc its answer without one (b:ale_completion_result) and a moment for Vim to show it
function! s:WhenMenu(...) abort
    let l:items = complete_info(['items']).items
    let s:tries += 1
    if empty(l:items) && s:tries < 200 && (!exists('b:ale_completion_result') || s:tries < 10)
        return timer_start(50, function('s:WhenMenu'))
    endif
    let s:case.offered = map(copy(l:items), 'v:val.word')
    let s:case.with_menu = getline('.')
    " CTRL-Y only with a menu (without, it copies the character above the cursor); CTRL-\ CTRL-N leaves insert mode
    " as <Esc> does, but is never read as the start of a key's escape sequence
    let l:take = empty(l:items) ? '' : (complete_info(['selected']).selected < 0 ? "\<C-n>\<C-y>" : "\<C-y>")
    call feedkeys(l:take . "\<C-\>\<C-n>", 'nt')
    call timer_start(50, function('s:Accepted'))
endfunction

function! s:Accepted(...) abort
    if mode() isnot# 'n'
        return timer_start(50, function('s:Accepted'))
    endif
    let s:case.line = getline('$')
    let s:case.lines = line('$')
    call add(s:report.cases, s:case)
    silent $delete _
    call timer_start(0, function('s:NextCase'))
endfunction

function! s:Changed(info) abort
    let s:report.changed = a:info.server.settings
    call s:Finish()
endfunction

call timer_start(120000, {-> s:Fail('timed out: ' . json_encode(s:report))})
call s:AskInfo(function('s:Ready'))
