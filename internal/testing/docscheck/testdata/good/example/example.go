// Package example is a fixture; its guide: https://github.com/oncekey/oncekey/blob/main/docs/guide.md#second-part.
package example

// Add adds.
func Add(a, b int) int {
	return a + b
}

// Mul multiplies.
func Mul(a, b int) int {
	return a * b
}
