// Package inbox is the web app behind `oncekey serve`: server-rendered pages that list the
// operations waiting for a person (unknown outcomes, per tenant, oldest first) and settle them
// through reconcile.Resolve, with authentication, CSRF protection and security headers.
// It must not import the interceptor, workflows, activities or worker packages.
package inbox
