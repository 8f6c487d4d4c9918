package jsonbody_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/jsonbody"
)

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		contentType string
		want        bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/json; charset=UTF-8", true},
		{"application/json; charset=Utf-8", true},
		{`application/json; charset="uTF-8"`, true},
		{"APPLICATION/JSON", true},
		{"application/json; charset=utf-16", false},
		{"application/json; charset=iso-8859-1", false},
		{"application/json; charset=", false},
		{"application/problem+json", false},
		{"text/json", false},
		{"", false},
	} {
		if got := jsonbody.IsJSON(tc.contentType); got != tc.want {
			t.Errorf("IsJSON(%q) = %v, want %v", tc.contentType, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	type request struct {
		Name string `json:"name" validate:"required"`
	}
	for _, tc := range []struct {
		body         string
		allowUnknown bool
		code         courier.Code // "" accepted
		field        string
	}{
		{`{"name":"a"}`, false, "", ""},
		{`{"name":"a","x":1}`, true, "", ""},
		{`{"name":"a","x":1}`, false, courier.CodeValidation, "x"},
		{`{"NAME":"a"}`, true, courier.CodeValidation, "NAME"},
		{`{"name":""}`, false, courier.CodeValidation, "name"},
		{`{"name":1}`, false, courier.CodeValidation, "name"},
		{`{"name":"a","name":"b"}`, false, courier.CodeDuplicateKey, ""},
		{`{"name":`, false, courier.CodeMalformedJSON, ""},
	} {
		rec := httptest.NewRecorder()
		var v request
		ok := jsonbody.Decode(rec, []byte(tc.body), &v, tc.allowUnknown)
		if tc.code == "" {
			if !ok || v.Name != "a" || rec.Body.Len() != 0 {
				t.Errorf("%s: refused (%s)", tc.body, rec.Body)
			}
			continue
		}
		var p struct {
			Code   courier.Code `json:"code"`
			Errors []struct{ Field string }
		}
		if ok || rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != tc.code {
			t.Errorf("%s: %v %d %s, want 400 %s", tc.body, ok, rec.Code, rec.Body, tc.code)
			continue
		}
		if tc.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tc.field) {
			t.Errorf("%s: errors %+v, want field %s", tc.body, p.Errors, tc.field)
		}
	}
}
