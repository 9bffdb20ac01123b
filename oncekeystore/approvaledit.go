package oncekeystore

// ApprovalReplaced: a person approved the call with edited arguments. The call as proposed never
// runs; the edit runs instead, as a new operation (Approval.EditedAs) with its own approval.
// A repeat of the original call within Policy.Retention is refused, as for a denial.
const ApprovalReplaced ApprovalStatus = "replaced"
