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
