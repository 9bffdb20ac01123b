// Package agent runs the tool calls a model proposes, from workflow code: a tool named at run
// time with the model's JSON arguments, answered with a oncekey.ToolResult a model can read.
// It must not import a vendor SDK (those adapters live in the nested adapters module).
package agent
