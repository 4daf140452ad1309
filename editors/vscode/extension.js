// hcqdsl's VS Code extension: the `hcq` language (package.json: highlighting from syntaxes/, generated from hcqdsl's
// grammar) and `hcqdsl lsp` started over stdio for .hcq files.
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("hcqdsl").get("command");
  client = new LanguageClient("hcqdsl", "hcqdsl", { command, args, transport: TransportKind.stdio },
                              { documentSelector: [{ language: "hcq" }] });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() { return client ? client.stop() : undefined; }

module.exports = { activate, deactivate };
