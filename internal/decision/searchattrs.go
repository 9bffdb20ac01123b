package decision

import (
	"time"

	"github.com/oncekey/oncekey/reconcile"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Typed search attributes of the reconciliation and approval workflows, set when the
// interceptor's Options.SearchAttributes is on: at start, and again on every change of the
// workflow's state. They let the Temporal UI and `temporal workflow list --query` find what waits,
// by status, tool and tenant.
// Each must be registered on the namespace first (`oncekey setup search-attributes`): a
// workflow that sets an unregistered one fails its workflow task until it is registered. Their
// values are stored unencrypted in Temporal's visibility store: payload codecs do not apply.
var (
	// SearchAttributeStatus (Keyword) is, on a reconciliation workflow, its State:
	// "waiting_for_resolution" while it waits for a person, "resolved" once settled. On an
	// approval workflow it is one of the SearchStatus… values: "waiting_for_approval" while it
	// waits for a decision, then "approved", "denied" or "timed_out".
	SearchAttributeStatus = temporal.NewSearchAttributeKeyKeyword("OncekeyStatus")
	// SearchAttributeTool (Keyword) is the tool (activity type) whose outcome is reconciled.
	SearchAttributeTool = temporal.NewSearchAttributeKeyKeyword("OncekeyTool")
	// SearchAttributeTenant (Keyword) is the operation's tenant.
	SearchAttributeTenant = temporal.NewSearchAttributeKeyKeyword("OncekeyTenant")
	// SearchAttributeWaitingSince (Datetime) is when the workflow started waiting for a person;
	// unset before. On an approval workflow it is when the approval was asked
	// (oncekeystore.Approval.RequestedAt, the store's clock), set once the workflow waits for it.
	SearchAttributeWaitingSince = temporal.NewSearchAttributeKeyTime("OncekeyWaitingSince")
)

// SearchAttributeTypes are the search attributes above by name, with the type each must be
// registered with.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	SearchAttributeStatus.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttributeTool.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttributeTenant.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttributeWaitingSince.GetName(): enumspb.INDEXED_VALUE_TYPE_DATETIME,
}

// ApprovalSearchAttributes returns the updates that set the approval workflow's search
// attributes: status is one of the SearchStatus… values, waitingSince (unset when zero) when the
// approval was asked.
func ApprovalSearchAttributes(in ApprovalInput, status string, waitingSince time.Time) []temporal.SearchAttributeUpdate {
	u := []temporal.SearchAttributeUpdate{
		SearchAttributeStatus.ValueSet(status),
		SearchAttributeTool.ValueSet(in.Tool),
		SearchAttributeTenant.ValueSet(in.Tenant),
	}
	if !waitingSince.IsZero() {
		u = append(u, SearchAttributeWaitingSince.ValueSet(waitingSince.UTC()))
	}
	return u
}

// SearchAttributes returns the updates that set the workflow's search attributes for state
// (waitingSince unset when zero).
func SearchAttributes(in Input, state reconcile.State, waitingSince time.Time) []temporal.SearchAttributeUpdate {
	u := []temporal.SearchAttributeUpdate{
		SearchAttributeStatus.ValueSet(string(state)),
		SearchAttributeTool.ValueSet(in.Tool),
		SearchAttributeTenant.ValueSet(in.Tenant),
	}
	if !waitingSince.IsZero() {
		u = append(u, SearchAttributeWaitingSince.ValueSet(waitingSince.UTC()))
	}
	return u
}
