-- Headless Neovim (0.7+) driving the completer language server like a user would:
--   nvim --headless -u NONE -c "luafile tests/lsp_nvim_client.lua"
-- Environment: COMPLETER_NVIM_PYTHON (interpreter), COMPLETER_NVIM_FILE (a Python file),
-- COMPLETER_NVIM_CANDIDATES (JSON list of [line, col], 0-based), COMPLETER_NVIM_OUT (JSON report).
-- For each candidate cursor it "types" the line up to the cursor (deleting the rest, which sends an
-- incremental didChange), asks for textDocument/completion and, once a line is offered, applies
-- the item's textEdit and asks for textDocument/inlineCompletion at the same spot.

local out_path = os.getenv("COMPLETER_NVIM_OUT")
local report = { steps = {} }

local function finish()
  local f = assert(io.open(out_path, "w"))
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd("qall!")
end

local function step(name, value)
  table.insert(report.steps, name)
  report[name] = value
end

local ok, err = pcall(function()
  local file = os.getenv("COMPLETER_NVIM_FILE")
  local candidates = vim.fn.json_decode(os.getenv("COMPLETER_NVIM_CANDIDATES"))
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.bo[bufnr].filetype = "python"

  local client_id = vim.lsp.start_client({
    name = "completer",
    cmd = { os.getenv("COMPLETER_NVIM_PYTHON"), "-m", "lsp" },
    root_dir = vim.fn.fnamemodify(file, ":h"),
    init_options = { completer = { maxSuggestions = 3 } },
    flags = { debounce_text_changes = 0 },
  })
  step("client_id", client_id)
  vim.lsp.buf_attach_client(bufnr, client_id)
  local ready = vim.wait(30000, function()
    local client = vim.lsp.get_client_by_id(client_id)
    return client ~= nil and client.initialized == true
  end, 20)
  step("initialized", ready)
  local client = vim.lsp.get_client_by_id(client_id)
  step("inline_capability", client.server_capabilities ~= nil
    and client.server_capabilities.inlineCompletionProvider ~= nil)

  for _, cand in ipairs(candidates) do
    local line, col = cand[1], cand[2]
    local original = vim.api.nvim_buf_get_lines(bufnr, line, line + 1, false)[1]
    local typed = string.sub(original, 1, col)
    vim.api.nvim_buf_set_lines(bufnr, line, line + 1, false, { typed })  -- the user typed up to here
    vim.api.nvim_win_set_cursor(0, { line + 1, col })
    vim.wait(100)
    local params = vim.lsp.util.make_position_params()
    local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/completion", params, 20000)
    local response = responses and responses[client_id]
    local items = response and response.result and (response.result.items or response.result) or {}
    if response and response.error then
      step("completion_error", response.error)
      break
    end
    if #items > 0 then
      local item = items[1]
      step("typed", typed)
      step("position", { line, col })
      step("item", { label = item.label, newText = item.textEdit.newText, range = item.textEdit.range })
      vim.lsp.util.apply_text_edits({ item.textEdit }, bufnr, "utf-16")
      step("line_after", vim.api.nvim_buf_get_lines(bufnr, line, line + 1, false)[1])
      step("line_count", #vim.api.nvim_buf_get_lines(bufnr, 0, -1, false))

      -- inline completion right after typing the same prefix again
      vim.api.nvim_buf_set_lines(bufnr, line, line + 1, false, { typed })
      vim.api.nvim_win_set_cursor(0, { line + 1, col })
      vim.wait(100)
      local iparams = vim.lsp.util.make_position_params()
      iparams.context = { triggerKind = 2 }
      local iresponses = vim.lsp.buf_request_sync(bufnr, "textDocument/inlineCompletion", iparams, 20000)
      local iresponse = iresponses and iresponses[client_id]
      step("inline", iresponse and (iresponse.result or { error = iresponse.error }) or vim.NIL)
      break
    end
    vim.api.nvim_buf_set_lines(bufnr, line, line + 1, false, { original })
    vim.wait(50)
  end

  vim.lsp.stop_client(client_id)
  step("stopped", vim.wait(5000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 20))
end)

if not ok then
  report.error = tostring(err)
end
finish()
