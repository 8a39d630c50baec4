package api

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

// fill sets every field of the value v points to, recursively, to a value
// that is not zero: a field a converter forgets then shows as a difference.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 7, 15, 4, 5, 123456789, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(9)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

func filled[T any]() *T {
	v := new(T)
	fill(reflect.ValueOf(v))
	return v
}

// everyFieldSet fails for each field of m, recursively, that is not set:
// a wire field no Go field carries.
func everyFieldSet(t *testing.T, m protoreflect.Message, path string) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := path + "." + string(fd.Name())
		if !m.Has(fd) {
			t.Errorf("%s is not set", name)
			continue
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := m.Get(fd).List()
			for j := range l.Len() {
				everyFieldSet(t, l.Get(j).Message(), name)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			m.Get(fd).Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
				everyFieldSet(t, v.Message(), name)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			if fd.Message().FullName() != "google.protobuf.Timestamp" {
				everyFieldSet(t, m.Get(fd).Message(), name)
			}
		}
	}
}

// roundTrip checks that a value with every field set survives the wire
// both ways, and that it sets every field of the wire message.
func roundTrip[T any, M proto.Message](t *testing.T, to func(*T) M, from func(M) *T) {
	t.Helper()
	in := filled[T]()
	m := to(in)
	everyFieldSet(t, m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()))
	if out := from(m); !reflect.DeepEqual(out, in) {
		t.Errorf("%T changed on the wire:\n sent %+v\n  got %+v", in, in, out)
	}
}

func TestConvertersCarryEveryField(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"PodRequest", func(t *testing.T) { roundTrip(t, podRequestToProto, podRequestFromProto) }},
		{"StatusUpdate", func(t *testing.T) { roundTrip(t, statusUpdateToProto, statusUpdateFromProto) }},
		{"LogsOptions", func(t *testing.T) {
			roundTrip(t, func(o *LogsOptions) *cellv1.LogsRequest { return logsOptionsToProto(*o) },
				func(m *cellv1.LogsRequest) *LogsOptions { o := logsOptionsFromProto(m); return &o })
		}},
		{"ExecInput", func(t *testing.T) { roundTrip(t, execInputToProto, execInputFromProto) }},
		{"ExecOutput", func(t *testing.T) { roundTrip(t, execOutputToProto, execOutputFromProto) }},
		{"PortForwardFrame", func(t *testing.T) { roundTrip(t, frameToProto, frameFromProto) }},
		{"Stats", func(t *testing.T) { roundTrip(t, statsToProto, statsFromProto) }},
		{"ServicesUpdate", func(t *testing.T) { roundTrip(t, servicesUpdateToProto, servicesUpdateFromProto) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestUnsetTimesStayUnset(t *testing.T) {
	u := statusUpdateFromProto(statusUpdateToProto(&StatusUpdate{Events: []PodEvent{{Reason: "Started"}}}))
	if !u.Events[0].Time.IsZero() {
		t.Errorf("an event without a time came back at %v", u.Events[0].Time)
	}
	if m := statsToProto(&Stats{}); m.GetTime() != nil {
		t.Errorf("a zero sample time went on the wire as %v", m.GetTime())
	}
}

func TestEqualIsTheWiresEquality(t *testing.T) {
	a := filled[PodRequest]()
	b := filled[PodRequest]()
	if !a.Equal(b) {
		t.Error("two equal requests differ")
	}
	b.Env["x-string"] = append(b.Env["x-string"], EnvVar{Name: "MORE"})
	if a.Equal(b) {
		t.Error("requests with different environments are equal")
	}
	if !(&PodRequest{}).Equal(&PodRequest{Env: map[string][]EnvVar{}, RegistryCredentials: []RegistryCredential{}}) {
		t.Error("empty and missing lists differ, as they do not on the wire")
	}
	s, o := filled[Service](), filled[Service]()
	if !s.Equal(o) {
		t.Error("two equal services differ")
	}
	o.Ports[0].Endpoints = nil
	if s.Equal(o) {
		t.Error("services with different endpoints are equal")
	}
}
