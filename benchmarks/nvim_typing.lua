-- Typing into a real training script in real headless Neovim, as a person would; run by
-- benchmarks/nvim_typing.py, which starts the background load and summarises the record.
--
--   nvim --headless --clean -l nvim_typing.lua DOC SCRIPT MARKER RESULT_JSON
--
-- DOC is docs/editors.md: its tested Lua block configures the client (only `cmd` is pointed at
-- $TRAINLINT_BENCH_CMD, and the change debounce replaced by $DEBOUNCE_MS when that is set). The script opens SCRIPT, waits for trainlint's first diagnostics, then
-- below the first line after the middle of the file that starts (after indentation) with MARKER
-- types TEXT one key every $KEY_MS ms with Neovim's own change tracking and pull diagnostics at
-- work: nothing here sends a didChange or a pull. Every diagnostic answer is recorded with the
-- buffer version it was asked for (Neovim's handler context) and the time it came; every fifth key
-- a hover is asked at the model line and timed. The server's CPU time and resident memory are
-- read from /proc before and after. RESULT_JSON gets the raw record; the Python side computes
-- the figures.

local doc_path, script_path, marker, result_path = arg[1], arg[2], arg[3], arg[4]
local KEY_MS = tonumber(os.getenv("KEY_MS") or "") or 100
local TEXT = os.getenv("TYPED_TEXT") or 'print(f"step={step} loss={loss.item():.4f} lr={lr}")'
local FIRST_TIMEOUT_MS = tonumber(os.getenv("FIRST_TIMEOUT_MS") or "") or 120000
local SETTLE_MS = tonumber(os.getenv("SETTLE_MS") or "") or 10000
local MARKER_DOC = "<!-- tested by tests/test_neovim.py"

local result = { nvim = tostring(vim.version()), key_ms = KEY_MS, text = TEXT, keys = {}, answers = {}, hovers = {} }
local t0 = vim.uv.hrtime()
result.t0_ns = t0 -- CLOCK_MONOTONIC, as the server's timeline (TRAINLINT_TIMELINE) records
local function now_ms()
  return (vim.uv.hrtime() - t0) / 1e6
end

local function read(path)
  local file = assert(io.open(path, "r"))
  local text = file:read("*a")
  file:close()
  return text
end

local function server_pid()
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local cmdline = read("/proc/" .. pid .. "/cmdline")
    if cmdline:find("server", 1, true) then
      return pid
    end
  end
end

-- utime + stime in clock ticks (assumed 100 a second, as on every Linux this runs on), and VmRSS in kB.
local function cpu_ticks(pid)
  local stat = read("/proc/" .. pid .. "/stat")
  local after_name = stat:match("%) (.*)$")
  local fields = vim.split(after_name, " ", { plain = true })
  return tonumber(fields[12]) + tonumber(fields[13])
end

local function rss_kb(pid)
  return tonumber(read("/proc/" .. pid .. "/status"):match("VmRSS:%s+(%d+)"))
end

local function main()
  local doc = read(doc_path)
  local at = assert(doc:find(MARKER_DOC, 1, true), "docs/editors.md has no tested Neovim block")
  assert(load(assert(doc:match("```lua\n(.-)\n```", at)), "=docs/editors.md"))()
  local cmd = os.getenv("TRAINLINT_BENCH_CMD")
  if cmd and cmd ~= "" then
    vim.lsp.config("trainlint", { cmd = { cmd, "server" } })
  end
  -- $DEBOUNCE_MS replaces the documented change debounce (150 is Neovim's own default).
  local debounce = tonumber(os.getenv("DEBOUNCE_MS") or "")
  if debounce then
    vim.lsp.config("trainlint", { flags = { debounce_text_changes = debounce } })
  end

  -- Record every pull answer with the version it was asked for, then let Neovim handle it.
  local original = vim.lsp.handlers["textDocument/diagnostic"]
  vim.lsp.handlers["textDocument/diagnostic"] = function(err, res, ctx)
    local kind = err and ("error " .. tostring(err.code)) or (res and res.kind) or "nil"
    table.insert(result.answers, { t = now_ms(), version = ctx.version, kind = kind,
      items = (res and res.items) and #res.items or nil, result_id = res and res.resultId or nil })
    return original(err, res, ctx)
  end
  local original_push = vim.lsp.handlers["textDocument/publishDiagnostics"]
  vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, res, ctx)
    table.insert(result.answers, { t = now_ms(), version = res and res.version, kind = "push",
      items = res and #res.diagnostics or nil })
    return original_push(err, res, ctx)
  end

  -- When Neovim sent didOpen (the server had started and answered `initialize` by then), and each
  -- didChange with its version: when Neovim's change debounce let the key's change go.
  result.changes, result.requests = {}, {}
  vim.api.nvim_create_autocmd("LspNotify", {
    callback = function(args)
      if args.data.method == "textDocument/didOpen" and not result.did_open_ms then
        result.did_open_ms = now_ms()
      elseif args.data.method == "textDocument/didChange" then
        local params = args.data.params or {}
        table.insert(result.changes, { t = now_ms(), version = params.textDocument and params.textDocument.version })
      end
    end,
  })
  -- Every pull and hover as it is sent, cancelled and completed, by request id.
  vim.api.nvim_create_autocmd("LspRequest", {
    callback = function(args)
      local request = args.data.request or {}
      if request.method == "textDocument/diagnostic" or request.method == "textDocument/hover" then
        table.insert(result.requests, { t = now_ms(), id = args.data.request_id, type = request.type, method = request.method })
      end
    end,
  })
  vim.cmd("filetype on")
  local opened_at = now_ms()
  vim.cmd.edit(vim.fn.fnameescape(script_path))
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  assert(vim.wait(FIRST_TIMEOUT_MS, function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = "trainlint" })[1]
    return client ~= nil and client.initialized
  end, 10), "the trainlint client did not attach")
  local first
  assert(vim.wait(FIRST_TIMEOUT_MS, function()
    for _, answer in ipairs(result.answers) do
      if answer.kind == "full" or answer.kind == "push" then
        first = answer.t
        return true
      end
    end
    return false
  end, 10), "no first diagnostics")
  result.first_report_ms = first - opened_at
  result.first_after_did_open_ms = first - result.did_open_ms
  result.debounce_ms = client.flags.debounce_text_changes or 150 -- Neovim's default when unset
  local pid = assert(server_pid(), "no server process under Neovim")
  vim.wait(1000, function() return false end, 50)

  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local target
  for i = math.floor(#lines / 2), #lines do
    if vim.trim(lines[i]):sub(1, #marker) == marker then
      target = i
      break
    end
  end
  assert(target, "no line starting with " .. marker .. " after the middle of the file")
  local indent = lines[target]:match("^%s*")
  if vim.trim(lines[target]):sub(-1) == ":" then
    indent = indent .. "    " -- a block's header: the statement goes into its body
  end
  local hover_line
  for i, text in ipairs(lines) do
    if text:find("from_pretrained(", 1, true) or text:find("model = ", 1, true) then
      hover_line = i - 1
      break
    end
  end
  hover_line = hover_line or 0

  -- A new line below the marker's line, with its indentation: Enter, as a person would.
  vim.api.nvim_buf_set_lines(bufnr, target, target, false, { indent })
  result.typed_line = target -- 0-based line of the new statement
  local cpu_before, rss_before = cpu_ticks(pid), rss_kb(pid)
  result.typing_started_ms = now_ms()
  local column = #indent
  for index = 1, #TEXT do
    local key_at = now_ms()
    local ch = TEXT:sub(index, index)
    vim.api.nvim_buf_set_text(bufnr, target, column, target, column, { ch })
    column = column + 1
    table.insert(result.keys, { t = key_at, version = vim.lsp.util.buf_versions[bufnr] })
    if index % 5 == 0 then
      local asked = now_ms()
      local hover = { asked = asked }
      table.insert(result.hovers, hover)
      client:request("textDocument/hover", {
        textDocument = { uri = vim.uri_from_bufnr(bufnr) },
        position = { line = hover_line, character = 4 },
      }, function() hover.answered = now_ms() end, bufnr)
    end
    -- Wait out the rest of the key's interval with the event loop running (vim.wait processes
    -- Neovim's timers and the server's messages, as an idle editor between keys does).
    local next_at = key_at + KEY_MS
    vim.wait(math.max(0, next_at - now_ms()), function() return now_ms() >= next_at end, 5)
  end
  result.typing_ended_ms = now_ms()
  local cpu_typing = cpu_ticks(pid) - cpu_before
  local final_version = vim.lsp.util.buf_versions[bufnr]
  vim.wait(SETTLE_MS, function()
    local last = result.answers[#result.answers]
    return last and last.version and last.version >= final_version and last.kind ~= "unchanged"
      and not last.kind:find("error", 1, true)
  end, 10)
  result.final_version = final_version
  result.server_cpu_ms_typing = cpu_typing * 10
  result.rss_kb_before, result.rss_kb_after = rss_before, rss_kb(pid)
  client:stop()
  vim.wait(5000, function() return client:is_stopped() end, 50)
  result.ok = true
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  result.error = tostring(err)
  io.stderr:write("nvim_typing failed: " .. tostring(err) .. "\n")
end
local file = assert(io.open(result_path, "w"))
file:write(vim.json.encode(result))
file:close()
vim.cmd(ok and "qall!" or "cquit 3")
