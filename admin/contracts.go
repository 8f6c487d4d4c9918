package admin

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/courier-go/courier/internal/wire"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
)

// The contract actions: an operator resolving an endpoint held back by a
// changed contract (see store.Contracts) either pins the digest its
// waiting commands were built for again, or fails those commands.

func (h *Handler) apiContracts(w http.ResponseWriter, r *http.Request) {
	list := h.lists().ContractPage
	if page, next, ok := pageByURL(h, w, r, list, toContract, func(k contractJSON) string { return k.Ref }); ok {
		writeJSON(w, http.StatusOK, contractPageJSON{Contracts: page, NextAfter: next})
	}
}

// pathEndpoint resolves the endpoint the path's {ref} names, answering
// 404 itself for a ref that is malformed or names no endpoint the store
// knows.
func (h *Handler) pathEndpoint(w http.ResponseWriter, r *http.Request) (string, bool) {
	ref := r.PathValue("ref")
	if !endpoint.IsRef(ref) {
		problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no endpoint with this ref")
		return "", false
	}
	url, err := h.resolve(r, ref)
	if err != nil {
		h.storeError(w, r, err)
		return "", false
	}
	return url, true
}

func (h *Handler) apiPin(w http.ResponseWriter, r *http.Request) {
	var req pinRequestJSON
	if !decodeJSON(w, r, &req) {
		return
	}
	if !wire.IsDigest(req.CapabilitiesSHA256) {
		invalid(w, "the request is not valid", "capabilities_sha256", "courier_sha256")
		return
	}
	target, ok := h.pathEndpoint(w, r)
	if !ok {
		return
	}
	if err := h.pin(r, target, req.CapabilitiesSHA256); err != nil {
		h.storeError(w, r, err)
		return
	}
	respond(h, w, r, toContract)(h.cfg.Store.Contracts.Get(r.Context(), target))
}

func (h *Handler) apiFailMismatched(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	target, ok := h.pathEndpoint(w, r)
	if !ok {
		return
	}
	n, err := h.failMismatched(r, target)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, failedJSON{Failed: n})
}

// pin pins an endpoint's capabilities digest and logs it, by ref.
func (h *Handler) pin(r *http.Request, target, digest string) error {
	if err := h.cfg.Store.Contracts.Pin(r.Context(), target, digest); err != nil {
		return err
	}
	h.cfg.Logger.InfoContext(r.Context(), "admin: contract", slog.String(logkey.Action, "pin"), slog.String(logkey.EndpointRef, endpoint.Ref(target)))
	return nil
}

// failMismatched fails an endpoint's deliveries held back by its changed
// contract and logs it, by ref.
func (h *Handler) failMismatched(r *http.Request, target string) (int, error) {
	n, err := h.cfg.Store.Contracts.FailMismatched(r.Context(), target)
	if err != nil {
		return 0, err
	}
	h.cfg.Logger.InfoContext(r.Context(), "admin: contract", slog.String(logkey.Action, "fail-mismatched"),
		slog.String(logkey.EndpointRef, endpoint.Ref(target)), slog.Int(logkey.Count, n))
	return n, nil
}

// formContract reads the endpoint a contract form names by endpoint_ref.
// It returns "" when it answered the refusal itself.
func (h *Handler) formContract(w http.ResponseWriter, r *http.Request, form url.Values) string {
	ref := form.Get("endpoint_ref")
	if !endpoint.IsRef(ref) {
		invalid(w, "the form is not valid", "endpoint_ref", "ref")
		return ""
	}
	target, err := h.resolve(r, ref)
	if err != nil {
		h.storeError(w, r, err)
		return ""
	}
	return target
}

func (h *Handler) opsPin(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r, "endpoint_ref", "capabilities_sha256")
	if !ok {
		return
	}
	digest := form.Get("capabilities_sha256")
	if !wire.IsDigest(digest) {
		invalid(w, "the form is not valid", "capabilities_sha256", "courier_sha256")
		return
	}
	target := h.formContract(w, r, form)
	if target == "" {
		return
	}
	if err := h.pin(r, target, digest); err != nil {
		h.storeError(w, r, err)
		return
	}
	seeOther(w, r, url.Values{"done": {"pin"}})
}

func (h *Handler) opsFailMismatched(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r, "endpoint_ref")
	if !ok {
		return
	}
	target := h.formContract(w, r, form)
	if target == "" {
		return
	}
	n, err := h.failMismatched(r, target)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	seeOther(w, r, url.Values{"done": {"fail-mismatched"}, "n": {strconv.Itoa(n)}})
}
