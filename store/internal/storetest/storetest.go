// Package storetest is the store conformance suite: every engine runs the
// very same tests through Run, so a guarantee shown on one engine is shown
// on all.
//
//	func TestSQLite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) *sqlx.DB { … a fresh, empty database … })
//	}
package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// OpenFunc returns a fresh, empty database for one test, closed by the
// test's cleanup.
type OpenFunc func(t *testing.T) *sqlx.DB

// Run runs the conformance suite against the engine open returns.
//
// migrated, when not nil, returns what open does after store.Migrate: a
// fresh database of the test's own already holding the current schema
// (on PostgreSQL a copy of one database migrated once, which costs the
// server far less than migrating each). The tests start from it, and
// their setup's Migrate finds nothing to do, but for Schema, which sees
// what Migrate does to a database it never ran on.
func Run(t *testing.T, open, migrated OpenFunc) {
	if migrated == nil {
		migrated = open // and setup migrates it
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, open OpenFunc)
	}{
		// What Migrate does to a database it never ran on: open's.
		{"Schema", func(t *testing.T, _ OpenFunc) { testSchema(t, open) }},
		{"SchemaAlteredNamesTableAndColumn", testSchemaAlteredNamesTableAndColumn},
		{"RollingDeployOnAnAdditiveNewerSchema", testRollingDeployOnAnAdditiveNewerSchema},
		{"NewerSchemaAnOlderCourierMustNotRun", testNewerSchemaAnOlderCourierMustNotRun},
		{"EnqueueCommitAndRollback", testEnqueueCommitAndRollback},
		{"ACallInAnEndedTransactionIsRefused", testACallInAnEndedTransactionIsRefused},
		{"EnqueueIdempotent", testEnqueueIdempotent},
		{"AnEndedContextIsItsOwnError", testAnEndedContextIsItsOwnError},
		{"EnqueueInvalid", testEnqueueInvalid},
		{"CustomProfiles", testCustomProfiles},
		{"StaleLeaseCannotSettle", testStaleLease},
		{"ParallelClaimers", testParallelClaimers},
		{"Quarantine", testQuarantine},
		{"ClaimGivesThePayloadsDigest", testClaimGivesThePayloadsDigest},
		{"PanickingHook", testPanickingHook},
		{"RetryDelay", testRetryDelay},
		{"RetryBudgetAndHorizon", testRetryBudgetAndHorizon},
		{"ReclaimIsBounded", testReclaimIsBounded},
		{"RedriveStopsAtTheAttemptBound", testRedriveStopsAtTheAttemptBound},
		{"EnqueueAgainAfterARedrive", testEnqueueAgainAfterARedrive},
		{"AnAttemptCutShortByAStopSparesTheBudget", testAnAttemptCutShortByAStopSparesTheBudget},
		{"AStopSparesNoTimeNorALeaseThatRanOut", testAStopSparesNoTimeNorALeaseThatRanOut},
		{"EnqueueAgainAcrossADefaultBudgetChange", testEnqueueAgainAcrossADefaultBudgetChange},
		{"EnqueueCommandAgainAfterARedrive", testEnqueueCommandAgainAfterARedrive},
		{"RepublishAfterARedrive", testRepublishAfterARedrive},
		{"RedriveCommitsInBatches", testRedriveCommitsInBatches},
		{"RedriveStopsWhenItsContextEnds", testRedriveStopsWhenItsContextEnds},
		{"Deadline", testDeadline},
		{"ClaimOrder", testClaimOrder},
		{"AttemptsLog", testAttemptsLog},
		{"Health", testHealth},
		{"Check", testCheck},
		{"HealthPrecedence", testHealthPrecedence},
		{"HealthCountsABacklogWaitingForRoom", testHealthCountsABacklogWaitingForRoom},
		{"HealthCountsNoBacklogOfAHeldEndpointBeforeAClaim", testHealthCountsNoBacklogOfAHeldEndpointBeforeAClaim},
		{"HealthCountsTheBacklogOfAnEndpointPastItsCoolDown", testHealthCountsTheBacklogOfAnEndpointPastItsCoolDown},
		{"HealthSaysPayloadUnreadable", testHealthSaysPayloadUnreadable},
		{"HealthBlocksOnDeliveriesPastTheirDeadline", testHealthBlocksOnDeliveriesPastTheirDeadline},
		{"HealthCountsOverdueParkedAndNotKeyed", testHealthCountsOverdueParkedAndNotKeyed},
		{"HealthBlocksOnAKeyHeldByItsFailedHead", testHealthBlocksOnAKeyHeldByItsFailedHead},
		{"HealthCountsTheBacklogOfEveryPriority", testHealthCountsTheBacklogOfEveryPriority},
		{"HealthIsOneSnapshot", testHealthIsOneSnapshot},
		{"CheckConstraints", testCheckConstraints},
		{"CheckAfterAClockStepBack", testCheckAfterAClockStepBack},
		{"EnqueueThroughADatabaseIsOneTransaction", testEnqueueThroughADatabaseIsOneTransaction},
		{"EnqueueThroughAnApplicationsHandleGoesWhereItSends", testEnqueueThroughAnApplicationsHandleGoesWhereItSends},
		{"EnqueueAgainAfterItsDeadline", testEnqueueAgainAfterItsDeadline},
		{"EnqueueInItsOwnTransactionIsCountedOnceCommitted", testEnqueueInItsOwnTransactionIsCountedOnceCommitted},
		{"EnqueueThroughAConnectionInATransactionIsRefused", testEnqueueThroughAConnectionInATransactionIsRefused},
		{"EnqueueRetriedInItsTransactionJoinsItsOrderingKey", testEnqueueRetriedInItsTransactionJoinsItsOrderingKey},
		{"CheckFindsADeliveryItsOrderingKeyNeverPromotes", testCheckFindsADeliveryItsOrderingKeyNeverPromotes},
		{"APanickingBuildLeavesNothingHeld", testAPanickingBuildLeavesNothingHeld},
		{"Inbox", testInbox},
		{"InboxConcurrentDuplicates", testInboxConcurrent},
		{"InboxPrune", testInboxPrune},
		{"InboxPruneOfAHeldClaim", testInboxPruneOfAHeldClaim},
		{"PruneRefusesNegativeBounds", testPruneRefusesNegativeBounds},
		{"PruneNeedsARetention", testPruneNeedsARetention},
		{"PruneTakesTheOldestFirst", testPruneTakesTheOldestFirst},
		{"PruneTakesDeadEndpointsRecords", testPruneTakesDeadEndpointsRecords},
		{"PruneTakesGoneEndpointsRecords", testPruneTakesGoneEndpointsRecords},
		{"PruneLeavesOnlyWhatAnOperatorSettles", testPruneLeavesOnlyWhatAnOperatorSettles},
		{"PruneKeepsAnEndpointDisabledAgain", testPruneKeepsAnEndpointDisabledAgain},
		{"ReplayCacheCap", testReplayCacheCap},
		{"InboxClaim", testInboxClaim},
		{"ReplayCache", testReplayCache},
		{"ReplayPruneIsBounded", testReplayPruneIsBounded},
		{"Wakeups", testWakeups},
		{"EveryCallOnAClosedStoreFails", testEveryCallOnAClosedStoreFails},
		{"Encryption", testEncryption},
		{"EncryptedDigestIsNotGuessable", testEncryptedDigestIsNotGuessable},
		{"QuarantinedIsCancelled", testQuarantinedIsCancelled},
		{"EncryptionIsCopiedAtOpen", testEncryptionIsCopiedAtOpen},
		{"SealedAckDigestsDoNotMatch", testSealedAckDigestsDoNotMatch},
		{"InboxUnderEncryption", testInboxUnderEncryption},
		{"InboxRecordUnderOtherBytesOfItsKeyIsUnreadable", testInboxRecordUnderOtherBytesOfItsKeyIsUnreadable},
		{"UnreadableQuarantineIsRedriven", testUnreadableQuarantineIsRedriven},
		{"RepublishAfterItsKeyIsDroppedIsACollision", testRepublishAfterItsKeyIsDroppedIsACollision},
		{"EncryptionLifecycle", testEncryptionLifecycle},
		{"KeysInUse", testKeysInUse},
		{"EnqueueAgainUnderOtherBytesOfItsKey", testEnqueueAgainUnderOtherBytesOfItsKey},
		{"SealedPayloadIsBoundToItsSigningKey", testSealedPayloadIsBoundToItsSigningKey},
		{"AnAttemptSettledAfterItsRowWasSealedAgainKeepsNoPlainAck", testAnAttemptSettledAfterItsRowWasSealedAgainKeepsNoPlainAck},
		{"Publish", testPublish},
		{"Suppression", testSuppression},
		{"ASubscriptionReceivesUnlessPaused", testASubscriptionReceivesUnlessPaused},
		{"PausedSubscriptionReceivesNothing", testPausedSubscriptionReceivesNothing},
		{"AClaimSeesPastTheRowsItEnds", testAClaimSeesPastTheRowsItEnds},
		{"UpdateKeepsALegacyAuthModesFingerprint", testUpdateKeepsALegacyAuthModesFingerprint},
		{"SubscriptionsAndPublishInvalid", testSubscriptionsAndPublishInvalid},
		{"Breaker", testBreaker},
		{"BreakerFollowsItsModel", testBreakerFollowsItsModel},
		{"BreakerDisablesLongFailures", testBreakerDisablesLongFailures},
		{"BreakerCountsConcurrentFailures", testBreakerCountsConcurrentFailures},
		{"BreakerCountsAnUnhealthyAnswerWhateverItsCode", testBreakerCountsAnUnhealthyAnswerWhateverItsCode},
		{"BreakerCountsAHealthCodeWhateverItsAnswer", testBreakerCountsAHealthCodeWhateverItsAnswer},
		{"SettlesSharingEndpointsDoNotDeadlock", testSettlesSharingEndpointsDoNotDeadlock},
		{"EventsReportWhatMoved", testEventsReportWhatMoved},
		{"EndpointEventsCarryNoCredentials", testEndpointEventsCarryNoCredentials},
		{"BreakerProbeAnsweredWithARefusalCloses", testBreakerProbeAnsweredWithARefusalCloses},
		{"IdleProbeWaitsForADelivery", testIdleProbeWaitsForADelivery},
		{"LateFailureKeepsTheProbeAlone", testLateFailureKeepsTheProbeAlone},
		{"AnAnswerEndsTheFailureStreak", testAnAnswerEndsTheFailureStreak},
		{"ASuppressedProbeIsNoProbe", testASuppressedProbeIsNoProbe},
		{"ALateAnswerKeepsTheProbeAlone", testALateAnswerKeepsTheProbeAlone},
		{"HealthBlocksOnADisabledEndpoint", testHealthBlocksOnADisabledEndpoint},
		{"ARateLimitAfterAClockStepBack", testARateLimitAfterAClockStepBack},
		{"ARateLimitHoldsAcrossSkewedClocks", testARateLimitHoldsAcrossSkewedClocks},
		{"AProbeTakesARateToken", testAProbeTakesARateToken},
		{"AProbeSpendsItsToken", testAProbeSpendsItsToken},
		{"AProbeWaitsForRoom", testAProbeWaitsForRoom},
		{"AProbeGivenBackIsMadeAgain", testAProbeGivenBackIsMadeAgain},
		{"AProbeSettledWithoutAnAnswerIsMadeAgain", testAProbeSettledWithoutAnAnswerIsMadeAgain},
		{"AProbeLeftWithoutAnAnswerIsNoLeaseExpiry", testAProbeLeftWithoutAnAnswerIsNoLeaseExpiry},
		{"ALateFailureKeepsAProbeGivenBackNoLeaseExpiry", testALateFailureKeepsAProbeGivenBackNoLeaseExpiry},
		{"SettleBatch", testSettleBatch},
		{"Release", testRelease},
		{"RemoteCodeIsKept", testRemoteCodeIsKept},
		{"Commands", testCommands},
		{"FailMismatchedEndsParkedCommands", testFailMismatchedEndsParkedCommands},
		{"Terminal", testTerminal},
		{"Admin", testAdmin},
		{"LookupByIdentity", testLookupByIdentity},
		{"ListShowsWhatGetShows", testListShowsWhatGetShows},
		{"ListTimeBoundsAreExact", testListTimeBoundsAreExact},
		{"TraceContextTravelsWithTheDelivery", testTraceContextTravelsWithTheDelivery},
		{"ClaimKeepsEachEndpointToItsCap", testClaimKeepsEachEndpointToItsCap},
		{"ClaimFollowsItsModel", testClaimFollowsItsModel},
		{"ParkedDeliveriesGoInPriorityOrder", testParkedDeliveriesGoInPriorityOrder},
		{"ClaimRefusesAnOwnerOutsideTheFormat", testClaimRefusesAnOwnerOutsideTheFormat},
		{"SettleRefusesCodesOutsideTheFormat", testSettleRefusesCodesOutsideTheFormat},
		{"SettleRefusesAStatusNoAnswerCarries", testSettleRefusesAStatusNoAnswerCarries},
		{"ParkedDeliveriesEndAtTheirDeadline", testParkedDeliveriesEndAtTheirDeadline},
		{"ParkedDeliveriesWaitOutOfTheDueIndex", testParkedDeliveriesWaitOutOfTheDueIndex},
		{"EndpointMaxInFlightHoldsAcrossWorkers", testEndpointMaxInFlightHoldsAcrossWorkers},
		{"EndpointRateIsATokenBucket", testEndpointRateIsATokenBucket},
		{"SetLimitsAgainKeepsTheBucket", testSetLimitsAgainKeepsTheBucket},
		{"SetLimitsAgainAfterAClockStepBack", testSetLimitsAgainAfterAClockStepBack},
		{"EndpointRateHoldsAcrossPriorities", testEndpointRateHoldsAcrossPriorities},
		{"LimitsInvalid", testLimitsInvalid},
		{"LimitsAtTheirBounds", testLimitsAtTheirBounds},
		{"ListPagesAtTheirBounds", testListPagesAtTheirBounds},
		{"OrderingKeySendsOneAtATimeInOrder", testOrderingKeySendsOneAtATimeInOrder},
		{"EnqueueManyKeepsAKeysOrderAsListed", testEnqueueManyKeepsAKeysOrderAsListed},
		{"OrderingFailedHeadHoldsKey", testOrderingFailedHeadHoldsKey},
		{"OrderingQuarantinedHeadIsCancelled", testOrderingQuarantinedHeadIsCancelled},
		{"OrderingSkipFailedLetsTheNextGo", testOrderingSkipFailedLetsTheNextGo},
		{"OrderingKeyInvalid", testOrderingKeyInvalid},
		{"OrderingKeyConcurrentEnqueuesTakeTurns", testOrderingKeyConcurrentEnqueuesTakeTurns},
		{"OrderingKeySurvivesLeaseExpiry", testOrderingKeySurvivesLeaseExpiry},
		{"PublishOrderingKey", testPublishOrderingKey},
		{"OrderingRedriveAfterTheKeyMovedOn", testOrderingRedriveAfterTheKeyMovedOn},
		{"OrderingRedriveOfSeveralSkipped", testOrderingRedriveOfSeveralSkipped},
		{"OrderingCancelOfAWaitingDeliveryOrAHead", testOrderingCancelOfAWaitingDeliveryOrAHead},
		{"OrderingKeyAcrossDisableAndEnable", testOrderingKeyAcrossDisableAndEnable},
		{"OrderingDeadlineWhileWaiting", testOrderingDeadlineWhileWaiting},
		{"OrderingPruneOfAKeysFinishedDeliveries", testOrderingPruneOfAKeysFinishedDeliveries},
		{"OrderingKeyOfAPausedSubscription", testOrderingKeyOfAPausedSubscription},
		{"OrderingKeyOfADisabledEndpointEndsAtItsDeadlines", testOrderingKeyOfADisabledEndpointEndsAtItsDeadlines},
		{"OrderingKeysUnderOperatorsAtRandom", testOrderingKeysUnderOperatorsAtRandom},
		{"PublishBuildErrorWritesNothing", testPublishBuildErrorWritesNothing},
		{"PublishNamesTheBuildOfARefusedPayload", testPublishNamesTheBuildOfARefusedPayload},
		{"PublishSetsEachReportingDeliverysKey", testPublishSetsEachReportingDeliverysKey},
		{"PublishRefusesAReportingPayloadTooLargeWithItsKey", testPublishRefusesAReportingPayloadTooLargeWithItsKey},
		{"PublishRefusesAnIntegerAReportingReceiverRefuses", testPublishRefusesAnIntegerAReportingReceiverRefuses},
		{"RepublishFindsAReportingDeliveryPublishedBeforeItsKeyWasSet", testRepublishFindsAReportingDeliveryPublishedBeforeItsKeyWasSet},
		{"RepublishAfterASubscriptionChangeSendsUnderItAsItIsNow", testRepublishAfterASubscriptionChangeSendsUnderItAsItIsNow},
		{"RepublishBringsAnUnsentDeliveryUpToDate", testRepublishBringsAnUnsentDeliveryUpToDate},
		{"RepublishFindsAFinishedDeliveryAsItIs", testRepublishFindsAFinishedDeliveryAsItIs},
		{"RepublishSendsASuppressedDeliveryWithAFreshBudgetAndHorizon", testRepublishSendsASuppressedDeliveryWithAFreshBudgetAndHorizon},
		{"RepublishedDeliveryRejoinsItsOrderingKey", testRepublishedDeliveryRejoinsItsOrderingKey},
		{"RepublishStillRefusesWhatTheCallerChanged", testRepublishStillRefusesWhatTheCallerChanged},
		{"RepublishAfterItsDeadlineFindsItsDelivery", testRepublishAfterItsDeadlineFindsItsDelivery},
		{"RepublishUnderAnotherEventTypeIsACollision", testRepublishUnderAnotherEventTypeIsACollision},
		{"ListAndRedriveAbove32BitIDs", testListAndRedriveAbove32BitIDs},
		{"ListShowsTheLargestID", testListShowsTheLargestID},
		{"ListPagesThroughChanges", testListPagesThroughChanges},
		{"ListRefusesBadPaging", testListRefusesBadPaging},
		{"ClaimWithA64BitEndpointCap", testClaimWithA64BitEndpointCap},
		{"OneEndpointUnderEverySpelling", testOneEndpointUnderEverySpelling},
		{"AnEndpointStoredUnderAnotherSpellingIsStillNamedByIt", testAnEndpointStoredUnderAnotherSpellingIsStillNamedByIt},
		{"AKeyStoredUnderAnotherSpellingKeepsItsOrder", testAKeyStoredUnderAnotherSpellingKeepsItsOrder},
		{"ARedriveOfAnEndpointTakesItsStoredSpelling", testARedriveOfAnEndpointTakesItsStoredSpelling},
		{"ListAndBlockedKeysTakeAStoredSpelling", testListAndBlockedKeysTakeAStoredSpelling},
		{"ListPagesAnEndpointsSpellingsInIDOrder", testListPagesAnEndpointsSpellingsInIDOrder},
		{"AScrapeShowsWhatEndpointsListShows", testAScrapeShowsWhatEndpointsListShows},
		{"TheAdminsPagesAreWhatListShows", testTheAdminsPagesAreWhatListShows},
		{"TheAdminsPagesHoldThroughChanges", testTheAdminsPagesHoldThroughChanges},
		{"ListByIDIsGetWithoutItsPayload", testListByIDIsGetWithoutItsPayload},
		{"ResolveRemembersWhatItFound", testResolveRemembersWhatItFound},
		{"UpdateKeepsALegacySpellingsFingerprint", testUpdateKeepsALegacySpellingsFingerprint},
		{"ANewEndpointOnAPortNoDialReachesIsRefused", testANewEndpointOnAPortNoDialReachesIsRefused},
		{"AnEndpointStoredOnPortZeroIsStillNamedByIt", testAnEndpointStoredOnPortZeroIsStillNamedByIt},
		{"AnEndpointStoredWithARootedHostIsStillNamedByIt", testAnEndpointStoredWithARootedHostIsStillNamedByIt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, migrated)
		})
	}
}

// What PostgreSQL's text refuses and SQLite stores: a NUL byte, and a
// byte that is not UTF-8. Every string the store binds to SQL is refused
// with invalid_argument before it gets there, on both engines.
const (
	nul     = "\x00"
	notUTF8 = "\xff"
)

// bundle is what most tests need.
type bundle struct {
	db    *sqlx.DB
	store *store.Store
	clock *fakeclock.Clock
	ctx   context.Context
}

// setup migrates a fresh database and opens a Store over it with a
// settable clock.
func setup(t *testing.T, open OpenFunc, cfg store.Config) *bundle {
	t.Helper()
	db := open(t)
	ctx := t.Context()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	clock := fakeclock.New()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	s, err := openStore(t, ctx, db, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &bundle{db: db, store: s, clock: clock, ctx: ctx}
}

// payloadTable is the table where an engine keeps a delivery's stored
// payload, in its column payload, keyed by the delivery's id: a column of
// the delivery's row, or on SQLite a table of its own (migration 13).
// What tests outside package store read or alter, as someone other than
// courier would, to see what courier stored or what it makes of a
// payload altered behind its back.
func payloadTable(s *store.Store) string {
	if s.Engine() == "sqlite" {
		return "courier_outbox_payload"
	}
	return "courier_outbox"
}

// alterPayload writes p over the stored payload of delivery id, as someone
// other than courier would.
func (b *bundle) alterPayload(t *testing.T, id int64, p []byte) {
	t.Helper()
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE "+payloadTable(b.store)+" SET payload = ? WHERE id = ?"), p, id); err != nil {
		t.Fatal(err)
	}
}

// heard collects the Hook's events of some kinds (all when none are
// named): hook is the Config.Hook, take returns what it heard since the
// last take.
type heard struct {
	mu     sync.Mutex
	kinds  []store.EventKind
	events []store.Event
}

func hearing(kinds ...store.EventKind) *heard { return &heard{kinds: kinds} }

// endpointEvent is the EventEndpoint a breaker of url moving from from to
// to for code reports: the endpoint without its credentials, and its ref.
func endpointEvent(url string, from, to store.EndpointState, code courier.Code) store.Event {
	return store.Event{Kind: store.EventEndpoint, Endpoint: endpoint.Redact(url), EndpointRef: endpoint.Ref(url), From: from, To: to, Code: code}
}

func (h *heard) hook(e store.Event) {
	if len(h.kinds) > 0 && !slices.Contains(h.kinds, e.Kind) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *heard) take() []store.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.events
	h.events = nil
	return out
}

// openStore is store.Open with the Store closed when t ends: on SQLite a
// Store holds a writer connection of its own.
func openStore(t testing.TB, ctx context.Context, db *sqlx.DB, cfg store.Config) (*store.Store, error) {
	s, err := store.Open(ctx, db, cfg)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// enqueue enqueues p in a committed transaction of its own.
func (b *bundle) enqueue(t *testing.T, p store.EnqueueParams) store.Enqueued {
	t.Helper()
	e, err := inCommitted(t, b, func(tx *sqlx.Tx) (store.Enqueued, error) { return b.store.Outbox.Enqueue(b.ctx, tx, p) })
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return e
}

// inCommitted runs write in a transaction of its own, committed when
// write succeeds and rolled back when it fails, and returns what write
// returned.
func inCommitted[T any](t *testing.T, b *bundle, write func(tx *sqlx.Tx) (T, error)) (T, error) {
	t.Helper()
	tx := b.begin(t)
	v, err := write(tx)
	if err != nil {
		tx.Rollback()
		return v, err
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return v, nil
}

func (b *bundle) begin(t *testing.T) *sqlx.Tx {
	t.Helper()
	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return tx
}

func (b *bundle) claim(t *testing.T, owner string, limit int, lease time.Duration) []protocol.Claimed {
	t.Helper()
	c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: owner, Limit: limit, Lease: lease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

func (b *bundle) get(t *testing.T, id int64) store.Delivery {
	t.Helper()
	d, err := b.store.Outbox.Get(b.ctx, id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return d
}

// delivery returns enqueue parameters for a small JSON notification.
func delivery(id string) store.EnqueueParams {
	return store.EnqueueParams{
		NotificationID: id,
		Endpoint:       "https://receiver.example/hooks",
		Payload:        []byte(`{"notification_id":"` + id + `"}`),
	}
}

// proto is the worker protocol of the bundle's store.
func (b *bundle) proto() protocol.Outbox { return protocol.For(b.store) }

// settle settles one outcome and returns its lease error, if any.
func (b *bundle) settle(oc protocol.Outcome) error {
	s, err := b.proto().Settle(b.ctx, oc)
	if err != nil {
		return err
	}
	return s[0].Err
}

// complete settles a success with the Ack digest ack.
func (b *bundle) complete(l protocol.Lease, ack string) error {
	return b.settle(protocol.Outcome{Lease: l, Result: protocol.Succeeded, AckSHA256: ack})
}

// fail settles a permanent failure.
func (b *bundle) fail(l protocol.Lease, code courier.Code, httpStatus int) error {
	return b.settle(protocol.Outcome{Lease: l, Result: protocol.Failed, Code: code, HTTPStatus: httpStatus})
}

// retryParams is a failed attempt to retry: Delay defaults to what a
// worker's default backoff, without jitter, would choose from a base of a
// second (see backoff).
type retryParams struct {
	Code       courier.Code
	HTTPStatus int
	Delay      time.Duration
}

// retry settles a failure to retry.
func (b *bundle) retry(l protocol.Lease, p retryParams) error {
	if p.Delay == 0 {
		p.Delay = backoff(l.Attempt)
	}
	return b.settle(protocol.Outcome{Lease: l, Result: protocol.Retry, Code: p.Code, HTTPStatus: p.HTTPStatus, RetryDelay: p.Delay})
}

// backoff doubles a second with each attempt, up to a minute.
func backoff(attempt int) time.Duration {
	return min(time.Second<<min(attempt-1, 6), time.Minute)
}
