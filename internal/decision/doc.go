// Package decision holds what the engine gives the decision workflows and reads back from them
// that no operator needs: the workflows' inputs and their continue-as-new state, and the
// search attributes they set. The operator's side of the same protocol (resolutions, decisions,
// reports, workflow IDs) is package reconcile.
package decision
