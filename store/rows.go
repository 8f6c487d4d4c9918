package store

import (
	"database/sql"

	"github.com/courier-go/courier"
)

// Row structs: what the named queries return, column by column (db tags),
// scanned by sqlx. Each query selects a subset of its table's columns; a
// column no query selects is simply left zero. Times are unix
// microseconds, converted at the edge of each method.

// outboxRow is a row of courier_outbox.
type outboxRow struct {
	ID                      int64          `db:"id"`
	NotificationID          string         `db:"notification_id"`
	Endpoint                string         `db:"endpoint"`
	Payload                 []byte         `db:"payload"`
	PayloadKeyID            string         `db:"payload_key_id"`
	PayloadSHA256           string         `db:"payload_sha256"`
	Profile                 string         `db:"profile"`
	KeyID                   string         `db:"key_id"`
	SubscriptionID          sql.NullInt64  `db:"subscription_id"`
	SubscriptionFingerprint sql.NullString `db:"subscription_fingerprint"`
	ContractSHA256          sql.NullString `db:"contract_sha256"`
	EventType               sql.NullString `db:"event_type"` // a published delivery's event type, a command's operation
	DedupeKey               sql.NullString `db:"dedupe_key"` // a terminal notification's event_id
	Status                  courier.Status `db:"status"`
	Priority                int            `db:"priority"`
	Attempts                int            `db:"attempts"`
	MaxAttempts             int            `db:"max_attempts"`
	EnqueuedMaxAttempts     sql.NullInt64  `db:"enqueued_max_attempts"` // the budget its enqueue asked for (migration 12 on SQLite, 13 on PostgreSQL); NULL if enqueued before
	SparedAttempts          int            `db:"spared_attempts"`       // attempts cut short as their worker stopped, which grew the budget (migration 16)
	NextAttemptAt           int64          `db:"next_attempt_at"`
	Deadline                int64          `db:"deadline"`
	LeaseOwner              sql.NullString `db:"lease_owner"`
	LeaseToken              sql.NullString `db:"lease_token"`
	LeasedAt                sql.NullInt64  `db:"leased_at"`
	LeaseExpiresAt          sql.NullInt64  `db:"lease_expires_at"`
	LastErrorCode           sql.NullString `db:"last_error_code"`
	LastStatus              sql.NullInt64  `db:"last_status"`
	LastRemoteCode          sql.NullString `db:"last_remote_code"`
	AckSHA256               sql.NullString `db:"ack_sha256"`
	CreatedAt               int64          `db:"created_at"`
	UpdatedAt               int64          `db:"updated_at"`
	TraceParent             sql.NullString `db:"trace_parent"` // the enqueue's W3C trace context (migration 7)
	TraceState              sql.NullString `db:"trace_state"`
	OrderingKey             sql.NullString `db:"ordering_key"`
	Hold                    sql.NullString `db:"hold"`         // why an unfinished row is out of the due index: key, endpoint
	KeyUnjoined             bool           `db:"key_unjoined"` // outbox_check_rows: held by its key, which no key's row will promote
}

// delivery converts the row; its payload is as stored (see Outbox.open).
func (r outboxRow) delivery() Delivery {
	return Delivery{
		ID: r.ID, NotificationID: r.NotificationID, Endpoint: r.Endpoint, Payload: r.Payload,
		PayloadKeyID: r.PayloadKeyID, PayloadSHA256: r.PayloadSHA256, Profile: r.Profile, KeyID: r.KeyID,
		Status: r.Status, Priority: r.Priority, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		NextAttemptAt: fromMicros(r.NextAttemptAt), Deadline: fromMicros(r.Deadline),
		LeaseOwner: r.LeaseOwner.String, LeasedAt: nullMicros(r.LeasedAt), LeaseExpiresAt: nullMicros(r.LeaseExpiresAt),
		LastErrorCode: courier.Code(r.LastErrorCode.String), LastHTTPStatus: int(r.LastStatus.Int64),
		LastRemoteCode: courier.Code(r.LastRemoteCode.String), AckSHA256: r.AckSHA256.String,
		SubscriptionID: r.SubscriptionID.Int64, CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt),
		OrderingKey: r.OrderingKey.String, Held: Hold(r.Hold.String),
	}
}

// attemptRow is a row of courier_attempts.
type attemptRow struct {
	ID             int64          `db:"id"`
	DeliveryID     int64          `db:"delivery_id"`
	Attempt        int            `db:"attempt"`
	Owner          string         `db:"owner"`
	LeasedAt       int64          `db:"leased_at"`
	LeaseExpiresAt int64          `db:"lease_expires_at"`
	FinishedAt     int64          `db:"finished_at"`
	DurationUS     int64          `db:"duration_us"`
	Outcome        string         `db:"outcome"`
	HTTPStatus     sql.NullInt64  `db:"http_status"`
	ErrorCode      sql.NullString `db:"error_code"`
	RemoteCode     sql.NullString `db:"remote_code"`
}

// endpointRow is a row of courier_endpoints.
type endpointRow struct {
	Endpoint            string         `db:"endpoint"`
	State               string         `db:"state"`
	ConsecutiveFailures int            `db:"consecutive_failures"`
	FailingSince        sql.NullInt64  `db:"failing_since"`
	OpenUntil           sql.NullInt64  `db:"open_until"`
	Reason              sql.NullString `db:"reason"`
	UpdatedAt           int64          `db:"updated_at"`
	endpointLoad
}

// endpointLoad is an endpoint's limits (courier_endpoint_limits) and what
// it has in flight and blocked.
type endpointLoad struct {
	MaxInFlight int     `db:"max_in_flight"`
	Rate        float64 `db:"rate"`
	Burst       int     `db:"burst"`
	InFlight    int     `db:"in_flight"`
	BlockedKeys int     `db:"blocked_keys"`
}

// subscriptionRow is a row of courier_subscriptions.
type subscriptionRow struct {
	ID          int64  `db:"id"`
	Tenant      string `db:"tenant"`
	Endpoint    string `db:"endpoint"`
	EventTypes  string `db:"event_types"` // space-separated
	AuthMode    string `db:"auth_mode"`   // part of the fingerprint only (see SubscriptionParams.fingerprint)
	KeyID       string `db:"key_id"`
	Profile     string `db:"profile"`
	Fingerprint string `db:"fingerprint"`
	Active      bool   `db:"active"`
	CreatedAt   int64  `db:"created_at"`
	UpdatedAt   int64  `db:"updated_at"`
}

// inboxRow is a row of courier_inbox.
type inboxRow struct {
	PayloadSHA256 string `db:"payload_sha256"`
	PayloadKeyID  string `db:"payload_key_id"`
	Status        string `db:"status"`
	Ack           []byte `db:"ack"`
	CreatedAt     int64  `db:"created_at"`
	UpdatedAt     int64  `db:"updated_at"`
}
