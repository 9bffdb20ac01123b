package storemock_test

import (
	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/oncekeystore/storemock"
)

// The mocks implement their interfaces, and a struct embedding both is a store that keeps
// approvals, as the package doc says.
var (
	_ oncekeystore.Store         = (*storemock.Store)(nil)
	_ oncekeystore.ApprovalStore = (*storemock.ApprovalStore)(nil)
	_ interface {
		oncekeystore.Store
		oncekeystore.ApprovalStore
	} = struct {
		*storemock.Store
		*storemock.ApprovalStore
	}{}
)
