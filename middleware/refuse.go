package middleware

import (
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// Refuse answers a request the way every refusal of courier's handlers
// and middleware is answered: status, Content-Type
// application/problem+json, and an RFC 9457 body carrying a stable code,
//
//	{"type":"about:blank","title":"Unsupported Media Type","status":415,"code":"unsupported_media_type","detail":"…"}
//
// (title is status's text; an empty detail is left out). It is for the
// refusals of a receiver of your own (see the package doc): a sender
// judges an answer by its status (by default a 4xx other than 408, 425
// and 429 fails a courier delivery for good), and a courier sender keeps
// code beside its own as the delivery's remote code. detail is sent to the client as it is: keep
// request content and secrets out of it. Nothing must have been written
// to w before. Under [Transaction], a status of 400 or above rolls the
// request's transaction back.
func Refuse(w http.ResponseWriter, status int, code courier.Code, detail string) {
	problem.Error(w, status, code, detail)
}
