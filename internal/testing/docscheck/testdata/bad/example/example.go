// Package example is a fixture; its guides: https://github.com/oncekey/oncekey/blob/main/docs/guide.md#nope and
// https://github.com/oncekey/oncekey/blob/main/docs/gone.md
package example

// Add adds.
func Add(a, b int) int {
	return a + b
}

// Mul multiplies.
func Mul(a, b int) int {
	return a * b
}
