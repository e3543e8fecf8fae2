-- Typing in a real Neovim 0.11 while trainlint's analysis is held (run by tests/test_server_typing.py).
--
--   nvim --headless --clean -l typing_while_held.lua TRAIN_FILE PROJECT_DIR RESULT_JSON
--
-- The project's plugin rule holds every analysis while PROJECT_DIR/GATE exists (and touches HELD
-- when it does). The script opens TRAIN_FILE, waits for its diagnostics, creates GATE, adds a line
-- at the top, waits until the analysis of that text is held, adds a second line, and waits for
-- Neovim to show the first diagnostic two lines further down: a report that can only come from the
-- server answering while its analysis is held. Then it removes GATE and pulls the text's own report.
-- Any error: the JSON gets an "error" field and Neovim exits with status 3.

local train_path, project, result_path = arg[1], arg[2], arg[3]
local TIMEOUT = 20000
local result = {}

local function write_result()
  local file = assert(io.open(result_path, "w"))
  file:write(vim.json.encode(result))
  file:close()
end

local function wait_for(what, condition)
  if not vim.wait(TIMEOUT, condition, 20) then
    error(string.format("timed out after %d ms waiting for %s", TIMEOUT, what), 2)
  end
end

local function exists(path)
  return vim.uv.fs_stat(path) ~= nil
end

local ok, err = pcall(function()
  vim.lsp.config("trainlint", {
    cmd = { os.getenv("TRAINLINT_E2E_CMD"), "server" },
    filetypes = { "python" },
    root_markers = { "pyproject.toml" },
    init_options = { allowLocalPlugins = true },
  })
  vim.lsp.enable("trainlint")
  vim.cmd.edit(train_path)
  local bufnr = vim.api.nvim_get_current_buf()

  local function first_line() -- the line of trainlint's first diagnostic, as Neovim holds it
    local first
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.source == "trainlint" and (first == nil or d.lnum < first) then
        first = d.lnum
      end
    end
    return first
  end

  wait_for("the first diagnostics", function() return first_line() ~= nil end)
  result.before = first_line()
  assert(io.open(project .. "/GATE", "w")):close()
  vim.api.nvim_buf_set_lines(bufnr, 0, 0, false, { "# one" })
  wait_for("the analysis of the edited text to be held", function() return exists(project .. "/HELD") end)
  vim.api.nvim_buf_set_lines(bufnr, 0, 0, false, { "# two" })
  wait_for("the first diagnostic two lines down", function() return first_line() == result.before + 2 end)
  result.held_throughout = exists(project .. "/GATE")
  result.while_held = first_line()
  os.remove(project .. "/GATE")
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = "trainlint" })[1]
  local answer = client:request_sync("textDocument/diagnostic", { textDocument = vim.lsp.util.make_text_document_params(bufnr) }, TIMEOUT, bufnr)
  assert(answer and not answer.err, "the pull after the release failed: " .. vim.inspect(answer))
  result.own_result_id = answer.result.resultId
  result.own = {}
  for _, item in ipairs(answer.result.items) do
    table.insert(result.own, { code = item.code, line = item.range.start.line })
  end
  result.ok = true
end)

if not ok then
  result.error = tostring(err)
end
write_result()
vim.cmd(ok and "qall!" or "cquit 3")
