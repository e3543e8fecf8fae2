-- End-to-end check of trainlint's language server in a real Neovim 0.11 (run by tests/test_neovim.py).
--
--   nvim --headless --clean -l trainlint_e2e.lua DOC TRAIN_FILE RESULT_JSON
--
-- DOC is docs/editors.md: the Lua block after its "tested by tests/test_neovim.py" marker is run
-- as it is (vim.lsp.config + vim.lsp.enable), then only `cmd` is pointed at $TRAINLINT_E2E_CMD
-- (the trainlint of the test's environment). The script opens TRAIN_FILE, waits for trainlint's
-- diagnostics, asks for hover and inlay hints on the model line, applies the preferred quick fix
-- of the TL101 diagnostic, waits for the diagnostics of the fixed text, and writes what it saw
-- to RESULT_JSON. Any error: the JSON gets an "error" field and Neovim exits with status 3.

local doc_path, train_path, result_path = arg[1], arg[2], arg[3]
local TIMEOUT = tonumber(os.getenv("TRAINLINT_E2E_TIMEOUT_MS") or "") or 20000
local MARKER = "<!-- tested by tests/test_neovim.py"

local result = { nvim = tostring(vim.version()) }
local started = vim.uv.hrtime()

local function log(message)
  io.stderr:write(string.format("[e2e %6.0f ms] %s\n", (vim.uv.hrtime() - started) / 1e6, message))
end

local function read(path)
  local file = assert(io.open(path, "r"))
  local text = file:read("*a")
  file:close()
  return text
end

local function write_result()
  local file = assert(io.open(result_path, "w"))
  file:write(vim.json.encode(result))
  file:close()
end

local function wait_for(what, condition)
  if not vim.wait(TIMEOUT, condition, 50) then
    error(string.format("timed out after %d ms waiting for %s", TIMEOUT, what), 2)
  end
end

local function documented_config()
  local doc = read(doc_path)
  local at = assert(doc:find(MARKER, 1, true), "docs/editors.md has no tested Neovim block marker")
  local block = doc:match("```lua\n(.-)\n```", at)
  assert(block, "no ```lua block after the marker in docs/editors.md")
  result.documented_config = block
  assert(load(block, "=docs/editors.md"))()
end

local function diagnostics_of(bufnr, client)
  local pull_ns = vim.lsp.diagnostic.get_namespace(client.id, true)
  local seen = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "trainlint" then
      table.insert(seen, {
        code = d.code,
        line = d.lnum, -- 0-based
        col = d.col,
        severity = d.severity,
        message = d.message,
        pulled = d.namespace == pull_ns,
      })
    end
  end
  table.sort(seen, function(a, b) return a.line < b.line end)
  return seen
end

local function find_diagnostic(bufnr, code)
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "trainlint" and d.code == code then
      return d
    end
  end
end

local function line_of(bufnr, pattern)
  for i, text in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if text:find(pattern, 1, true) then
      return i - 1
    end
  end
  error("no line containing " .. pattern)
end

local function request(client, bufnr, method, params)
  local answer, err = client:request_sync(method, params, TIMEOUT, bufnr)
  if not answer then
    error(method .. " failed: " .. tostring(err))
  end
  if answer.err then
    error(method .. " answered an error: " .. vim.inspect(answer.err))
  end
  return answer.result
end

local function hover_text(hover)
  if hover == nil or hover == vim.NIL then
    return nil
  end
  local contents = hover.contents
  if type(contents) == "string" then
    return contents
  end
  if contents.value then
    return contents.value
  end
  local parts = {}
  for _, part in ipairs(contents) do
    table.insert(parts, type(part) == "string" and part or part.value)
  end
  return table.concat(parts, "\n")
end

local function label_text(hint)
  if type(hint.label) == "string" then
    return hint.label
  end
  local parts = {}
  for _, part in ipairs(hint.label) do
    table.insert(parts, part.value)
  end
  return table.concat(parts)
end

local function main()
  assert(doc_path and train_path and result_path, "usage: trainlint_e2e.lua DOC TRAIN_FILE RESULT_JSON")
  assert(vim.lsp.config ~= nil and vim.lsp.enable ~= nil, "this Neovim has no vim.lsp.config / vim.lsp.enable")

  documented_config()
  local documented = vim.lsp.config.trainlint
  assert(documented, "the documented block did not configure a `trainlint` client")
  result.documented_cmd = documented.cmd
  local cmd = os.getenv("TRAINLINT_E2E_CMD")
  if cmd and cmd ~= "" then
    vim.lsp.config("trainlint", { cmd = { cmd, "server" } })
  end
  result.cmd = vim.lsp.config.trainlint.cmd

  vim.cmd("filetype on") -- `--clean -l` skips filetype detection; an init.lua user has it on
  vim.cmd.edit(vim.fn.fnameescape(train_path))
  local bufnr = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[bufnr].filetype

  local client
  wait_for("the trainlint client to attach", function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = "trainlint" })[1]
    return client ~= nil and client.initialized
  end)
  log("attached")
  result.offset_encoding = client.offset_encoding
  result.server_info = client.server_info
  result.root_dir = client.root_dir
  vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })

  wait_for("a TL101 diagnostic", function()
    return find_diagnostic(bufnr, "TL101") ~= nil
  end)
  log("diagnostics")
  result.diagnostics = diagnostics_of(bufnr, client)

  -- Hover on the model line, as `K` would ask for it.
  local model_line = line_of(bufnr, "torchvision.models.")
  result.model_line = model_line
  local text_document = { uri = vim.uri_from_bufnr(bufnr) }
  local hover = request(client, bufnr, "textDocument/hover", {
    textDocument = text_document,
    position = { line = model_line, character = 4 },
  })
  result.hover = hover_text(hover)
  log("hover")

  -- Inlay hints: those Neovim itself requested and keeps, and a direct request over the buffer.
  local line_count = vim.api.nvim_buf_line_count(bufnr)
  local raw = request(client, bufnr, "textDocument/inlayHint", {
    textDocument = text_document,
    range = { start = { line = 0, character = 0 }, ["end"] = { line = line_count, character = 0 } },
  })
  result.inlay_hints = {}
  for _, hint in ipairs(raw ~= vim.NIL and raw or {}) do
    table.insert(result.inlay_hints, { line = hint.position.line, label = label_text(hint) })
  end
  local shown
  vim.wait(TIMEOUT, function()
    shown = vim.lsp.inlay_hint.get({ bufnr = bufnr })
    return #shown > 0
  end, 50)
  result.inlay_hints_shown = {}
  for _, item in ipairs(shown or {}) do
    table.insert(result.inlay_hints_shown, { line = item.inlay_hint.position.line, label = label_text(item.inlay_hint) })
  end
  log("inlay hints")

  -- Code actions at the TL101 diagnostic; apply the preferred quick fix.
  local target = find_diagnostic(bufnr, "TL101")
  local lsp_diagnostic = target.user_data and target.user_data.lsp
  assert(lsp_diagnostic, "the TL101 diagnostic carries no LSP diagnostic (user_data.lsp)")
  local actions = request(client, bufnr, "textDocument/codeAction", {
    textDocument = text_document,
    range = lsp_diagnostic.range,
    context = { diagnostics = { lsp_diagnostic }, only = { "quickfix" }, triggerKind = 1 },
  })
  result.code_actions = {}
  local preferred
  for _, action in ipairs(actions ~= vim.NIL and actions or {}) do
    table.insert(result.code_actions, { title = action.title, kind = action.kind, preferred = action.isPreferred == true })
    if action.isPreferred and preferred == nil then
      preferred = action
    end
  end
  assert(preferred, "no preferred code action at the TL101 diagnostic")
  assert(preferred.edit, "the preferred code action has no edit")
  result.applied_action = preferred.title
  local before = vim.api.nvim_buf_get_changedtick(bufnr)
  vim.lsp.util.apply_workspace_edit(preferred.edit, client.offset_encoding)
  assert(vim.api.nvim_buf_get_changedtick(bufnr) ~= before, "applying the quick fix did not change the buffer")
  result.text_after_fix = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"

  -- Neovim sends the edit to the server and pulls again: TL101 must go away.
  wait_for("TL101 to disappear after the fix", function()
    return find_diagnostic(bufnr, "TL101") == nil
  end)
  result.diagnostics_after_fix = diagnostics_of(bufnr, client)
  log("fixed")

  client:stop()
  vim.wait(5000, function() return client:is_stopped() end, 50)
  result.ok = true
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  result.error = tostring(err)
  io.stderr:write("trainlint e2e failed: " .. tostring(err) .. "\n")
end
local written, write_err = pcall(write_result)
if not written then
  io.stderr:write("could not write " .. tostring(result_path) .. ": " .. tostring(write_err) .. "\n")
end
if not ok or not written then
  vim.cmd("cquit 3")
end
vim.cmd("qall!")
