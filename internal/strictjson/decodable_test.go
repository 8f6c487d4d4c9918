package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type (
	ctBase  struct{ ID string }
	ctLeft  struct{ ctBase }
	ctRight struct{ ctBase }
	// ctBoth gets ctBase.ID twice at one depth: encoding/json decodes
	// neither.
	ctBoth struct {
		ctLeft
		ctRight
	}
	// ctShadowed declares ID itself, which wins over the clashing pair.
	ctShadowed struct {
		ID string
		ctLeft
		ctRight
	}
	ctNode struct {
		Name string   `json:"name"`
		Kids []ctNode `json:"kids"`
		Up   *ctNode  `json:"up"`
	}
	ctHidden struct{ Region string }
	// ctOnlyUnexported embeds a pointer to an unexported struct type with
	// no field a body sets: nothing to allocate.
	ctOnlyUnexported struct {
		Name string
		//lint:ignore U1000 the embedding is what CheckType reads
		*ctEmpty
	}
	ctEmpty struct{ _ int }
	// ctSkipped hides its embedded pointer from encoding/json.
	ctSkipped struct {
		Name      string
		*ctHidden `json:"-"`
	}
	// ctInMap holds an embedded unexported pointer in a map's values.
	ctInMap struct {
		ByKey map[string]ctWithHidden
	}
	ctWithHidden struct {
		*ctHidden
	}
	// ctSelf decodes itself: its fields are its own affair.
	ctSelf struct {
		*ctHidden
		time.Time
	}
	ctTime struct {
		Name string
		time.Time
	}
	ctRaw struct {
		Raw json.RawMessage
		At  time.Time
	}
)

func (c *ctSelf) UnmarshalJSON([]byte) error { return nil }

// TestCheckType: CheckType refuses the struct types encoding/json cannot
// decode an object into as their fields declare, naming the field, and
// passes the ones it can.
func TestCheckType(t *testing.T) {
	for _, tc := range []struct {
		t    reflect.Type
		want string // "" for none
	}{
		{reflect.TypeFor[ctBoth](), `"ID" in JSON (strictjson.ctBase.ID)`},
		{reflect.TypeFor[ctShadowed](), ""},
		{reflect.TypeFor[ctNode](), ""},
		{reflect.TypeFor[ctOnlyUnexported](), ""},
		{reflect.TypeFor[ctEmpty](), ""},
		{reflect.TypeFor[ctSkipped](), ""},
		{reflect.TypeFor[ctInMap](), "strictjson.ctWithHidden.ctHidden"},
		{reflect.TypeFor[ctSelf](), ""},
		{reflect.TypeFor[ctTime](), "strictjson.ctTime.Time gives strictjson.ctTime its UnmarshalJSON"},
		{reflect.TypeFor[ctRaw](), ""},
	} {
		err := CheckType(tc.t)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckType(%s) = %v, want nil", tc.t, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckType(%s) = %v, want one naming %s", tc.t, err, tc.want)
		}
	}
	var both ctBoth
	if err := json.Unmarshal([]byte(`{"ID":"x"}`), &both); err != nil || both.ctLeft.ID != "" || both.ctRight.ID != "" {
		t.Errorf("encoding/json decoded ctBoth's clashing ID: %v, %+v", err, both)
	}
}

type (
	ctLogger interface{ Log(string) }
	ctHook   func()
	// ctIgnored embeds unexported types that are no structs, which
	// encoding/json ignores: its other fields decode as ever.
	ctIgnored struct {
		//lint:ignore U1000 the embedding is what CheckType reads
		ctLogger
		//lint:ignore U1000 the embedding is what CheckType reads
		*ctHook
		Name string `json:"name"`
	}
)

// TestCheckTypePassesEmbeddedFieldsJSONIgnores: an embedded field of an
// unexported type that is no struct (an interface with methods, a func)
// is no member of the body for encoding/json, which ignores it and decodes
// the rest; CheckType took it for a member no body can set and refused
// the type, and NewReceiver with it.
func TestCheckTypePassesEmbeddedFieldsJSONIgnores(t *testing.T) {
	var v ctIgnored
	if err := json.Unmarshal([]byte(`{"name":"x"}`), &v); err != nil || v.Name != "x" {
		t.Fatalf("encoding/json decoding ctIgnored: %v, %+v", err, v)
	}
	if err := CheckType(reflect.TypeFor[ctIgnored]()); err != nil {
		t.Errorf("CheckType(ctIgnored) = %v, want nil", err)
	}
}
