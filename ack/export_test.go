package ack

// Parse is parse, for the tests of package ack_test: Verify's reading of
// an Ack, apart from its comparison.
var Parse = parse
