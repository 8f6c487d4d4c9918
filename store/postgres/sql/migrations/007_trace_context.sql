-- Migration 7: the trace context of the enqueuing transaction. When the
-- Store has a Tracer, each delivery keeps the W3C trace context
-- (traceparent, tracestate) of the span its enqueue ran in, and every
-- attempt sends it on, so the receiver's work continues the business
-- transaction's trace across retries and worker processes. NULL when there
-- is none. Only trace identifiers are kept: a traceparent is 55 bytes in
-- version 00, longer only in a later version; a tracestate is at most 512
-- bytes (the store drops a longer one). It adds columns only, so it
-- applies after whatever migration 6 did.

ALTER TABLE courier_outbox ADD COLUMN trace_parent TEXT CHECK (trace_parent IS NULL OR length(trace_parent) BETWEEN 55 AND 512);

ALTER TABLE courier_outbox ADD COLUMN trace_state TEXT CHECK (trace_state IS NULL OR (trace_parent IS NOT NULL AND length(trace_state) BETWEEN 1 AND 512));
