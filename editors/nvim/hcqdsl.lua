-- hcqdsl's language server in Neovim's built-in LSP client (Neovim 0.7 and later): .hcq files get the filetype
-- `hcq` (with editors/vim on 'runtimepath': highlighting too) and `hcqdsl lsp` attached. Source it from init.lua:
--   dofile("/path/to/hcqdsl/editors/nvim/hcqdsl.lua")
-- or copy it there. `vim.g.hcqdsl_cmd` overrides the command (e.g. {"/path/to/venv/bin/hcqdsl", "lsp"}).
vim.cmd([[autocmd BufRead,BufNewFile *.hcq setfiletype hcq]])

local function root_of(path)
  local git = vim.fn.finddir(".git", vim.fn.fnamemodify(path, ":p:h") .. ";")
  return git ~= "" and vim.fn.fnamemodify(git, ":p:h:h") or vim.fn.fnamemodify(path, ":p:h")
end

local client_id = nil
vim.api.nvim_create_autocmd("FileType", {
  pattern = "hcq",
  callback = function(args)
    if client_id == nil or vim.lsp.get_client_by_id(client_id) == nil then
      client_id = vim.lsp.start_client({
        name = "hcqdsl",
        cmd = vim.g.hcqdsl_cmd or { "hcqdsl", "lsp" },
        root_dir = root_of(vim.api.nvim_buf_get_name(args.buf)),
      })
    end
    if client_id ~= nil then vim.lsp.buf_attach_client(args.buf, client_id) end
  end,
})
