// Package adapters is the root of oncekey's vendor adapters module
// (github.com/oncekey/oncekey/adapters): tool definitions from an oncekey.Registry in the shapes
// openai-go, anthropic-sdk-go and the MCP go-sdk take. It is a module of its own so that users of
// the core module never pull those SDKs; each adapter is its own package.
package adapters
