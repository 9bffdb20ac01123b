package example

// Add adds.
func Add(a, b int) int {
	return a + b
}

// Mul multiplies.
func Mul(a, b int) int {
	return a * b
}
