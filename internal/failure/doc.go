// Package failure is the table of oncekey's failure types: for each application error type a
// failure crosses Temporal with, what the workflow side does with it, whether it is an expected
// refusal and what a model is told. It must not import any oncekey package.
package failure
