package ack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// price is a catalogue's price change, sent by services whose encoders
// serialize JSON each their own way.
type price struct {
	ID    string `json:"id" validate:"required,courier_token"`
	SKU   string `json:"sku" validate:"required,courier_token"`
	Cents int    `json:"cents" validate:"min=1"`
}

// DedupeKey makes price an ack.Notification: its id is its identity.
func (p price) DedupeKey() string { return p.ID }

// PayloadSHA256 makes it an ack.Digester: its content, in canonical JSON,
// is what tells a redelivery from another price under the same id, not
// the bytes it came as.
func (p price) PayloadSHA256(body []byte) (string, error) {
	canonical, err := ack.Canonical(body)
	if err != nil {
		return "", err
	}
	return ack.Digest(canonical), nil
}

// Ack makes it an ack.Acker: the catalogue answers with an Ack of its own
// schema, naming the SKU and bound to the same digest.
func (p price) Ack(body []byte) (ack.Ack, error) {
	digest, err := p.PayloadSHA256(body)
	if err != nil {
		return ack.Ack{}, err
	}
	return ack.Ack{Schema: "catalog.price-ack.v1", NotificationID: p.ID, Status: "accepted",
		NotificationSHA256: digest, Extra: map[string]string{"sku": p.SKU}}, nil
}

// A payload type of one's own decides, through the interfaces it
// implements, how handler.NewReceiver dedupes and answers it. Here the
// same price re-serialized is a redelivery, answered with the stored Ack
// without applying it again; another price under the same id is refused
// 409. The sender judges the answer with a profile of its own (registered
// in store.Config.Profiles, named by its deliveries of prices) that
// expects the Ack the same method builds: courier's default profile
// would fail the delivery with ack_invalid.
func ExampleAcker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	keys := couriertest.StandardWebhooksKeys("pricing")

	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, p price) error {
			fmt.Println("applying", p.SKU, p.Cents)
			return nil // write the price with tx
		})
	if err != nil {
		panic(err)
	}
	var answers [][]byte
	for _, body := range []string{
		`{"id":"price-1","sku":"sku-7","cents":990}`,
		`{ "cents": 990, "sku": "sku-7", "id": "price-1" }`, // the same price, re-serialized
		`{"id":"price-1","sku":"sku-7","cents":1290}`,       // another price under its id
	} {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, couriertest.NewRequest("https://catalog.example/prices", "price-1", []byte(body), keys.Signer))
		fmt.Println(rec.Code)
		answers = append(answers, rec.Body.Bytes())
	}
	answer := answers[0]
	fmt.Println(string(answer))
	fmt.Println("redelivery answered alike:", bytes.Equal(answers[1], answer))

	// The sender's side: the profile its deliveries of prices name.
	profile := ack.Profile{Name: "catalog.price", Verify: func(sent ack.Sent, got []byte) error {
		var p price
		if err := json.Unmarshal(sent.Payload, &p); err != nil {
			return err
		}
		want, err := p.Ack(sent.Payload)
		if err != nil {
			return err
		}
		return want.Verify(got)
	}}
	sent := ack.Sent{ID: "price-1", Payload: []byte(`{"id":"price-1","sku":"sku-7","cents":990}`), Attempt: 1}
	fmt.Println("catalog.price:", profile.Verify(sent, answer))
	courierProfile, ok := ack.Builtin(ack.ProfileCourier)
	if !ok {
		panic("no courier profile")
	}
	fmt.Println("courier:", courier.CodeOf(courierProfile.Verify(sent, answer)))
	// Output:
	// applying sku-7 990
	// 200
	// 200
	// 409
	// {"notification_id":"price-1","notification_sha256":"4a0e1e72332bae8bf391efb0c339a650072b30bce2bca07f36c195e256818652","schema":"catalog.price-ack.v1","sku":"sku-7","status":"accepted"}
	// redelivery answered alike: true
	// catalog.price: <nil>
	// courier: ack_invalid
}
