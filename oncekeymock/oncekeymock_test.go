package oncekeymock_test

import (
	"github.com/oncekey/oncekey/oncekeymock"
	"github.com/oncekey/oncekey/oncekeystore"
)

// The mocks implement their interfaces, and a struct embedding both is a store that keeps
// approvals, as the package doc says.
var (
	_ oncekeystore.Store         = (*oncekeymock.Store)(nil)
	_ oncekeystore.ApprovalStore = (*oncekeymock.ApprovalStore)(nil)
	_ interface {
		oncekeystore.Store
		oncekeystore.ApprovalStore
	} = struct {
		*oncekeymock.Store
		*oncekeymock.ApprovalStore
	}{}
)
