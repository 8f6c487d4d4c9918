// Package client is courier's sender side at work: the delivery worker that
// claims due deliveries, signs and sends them, and settles each outcome, and
// the SSRF-safe HTTP transport it sends through ([Guard]).
package client
