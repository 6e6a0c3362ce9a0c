package proto

import (
	"bytes"
	"testing"
)

// numMethods is the number of control methods.
const numMethods = int(MethodGetInline-MethodInfo) + 1

// seedMessages adds every sample message to f's corpus.
func seedMessages(f *testing.F, reply bool) {
	for _, m := range sampleMessages() {
		b := m.Append(nil)
		if (b[5]&replyBit != 0) == reply {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte("SKSO\x01\x01\x00\x00"))
}

// fuzzDecode decodes b as the message its header names (and as every
// other kind, which must not panic either); an accepted message must
// re-encode to b exactly.
func fuzzDecode(t *testing.T, b []byte, reply bool) {
	for k := range numMethods {
		kind := byte(k + 1)
		if reply {
			kind |= replyBit
		}
		m := newMessage(kind)
		if err := m.Decode(b, &testWireLimits); err != nil {
			continue
		}
		if len(b) < headerSize || b[5] != kind {
			t.Fatalf("kind %#x accepted a message of kind %#x", kind, b[5])
		}
		if out := m.Append(nil); !bytes.Equal(out, b) {
			t.Fatalf("kind %#x: re-encoding differs:\n in %x\nout %x", kind, b, out)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	seedMessages(f, false)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, false) })
}

func FuzzDecodeReply(f *testing.F) {
	seedMessages(f, true)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, b, true) })
}
