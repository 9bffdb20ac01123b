package canonical_test

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/oncekey/oncekey/canonical"
)

func ExampleTransform() {
	out, err := canonical.Transform([]byte(`{ "b": [2.0, 1E30, 9007199254740993], "a": "cafe\u0301" }`))
	fmt.Println(string(out), err)
	// Output: {"a":"café","b":[2,1e+30,9007199254740993]} <nil>
}

func ExampleTransform_error() {
	_, err := canonical.Transform([]byte(`{"order":{"id":1,"id":2}}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, canonical.ErrDuplicateKey))
	// Output:
	// canonical: .order: duplicate key "id" (byte 17)
	// true
}

func ExampleMarshal() {
	type Item struct {
		SKU   string  `json:"sku"`
		Price float64 `json:"price"`
	}
	type Order struct {
		Items []Item    `json:"items"`
		At    time.Time `json:"at"`
	}
	at := time.Date(2025, 1, 2, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	out, err := canonical.Marshal(Order{Items: []Item{{"A-1", 2}}, At: at})
	fmt.Println(string(out), err)

	_, err = canonical.Marshal(Order{Items: []Item{{"A-1", 2}, {"B-2", math.NaN()}}})
	fmt.Println(err)
	// Output:
	// {"at":"2025-01-02T08:30:00Z","items":[{"price":2,"sku":"A-1"}]} <nil>
	// canonical: .items[1].price: NaN cannot be encoded
}
