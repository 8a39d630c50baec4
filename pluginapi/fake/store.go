package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Store is the simulated cloud: the instances of every cluster, shared by
// the providers built on it. Several providers with different cluster IDs on
// one Store see one cloud, as real plugins configured for different
// clusters would. A Store is safe for concurrent use.
type Store struct {
	mu        sync.Mutex
	nextID    int
	instances map[string]*record // by instance ID
	cells     map[string]*record // by cellKey(cluster, cell)
	// ended are the instances Terminate removed, by cellKey: a later
	// Launch of the cell answers its instance, terminated.
	ended     map[string]*record
	pending   map[*record]bool // instances still booting
	stateFile string
	subs      map[*subscriber]bool
	// volumes are the disks CreateVolume made, by handle.
	volumes     map[string]*volume
	nextVolume  int
	attachLimit int
}

// record is one instance and what the cloud knows about it beyond the
// Instance itself.
type record struct {
	ClusterID string             `json:"clusterID"`
	ReadyAt   time.Time          `json:"readyAt"`
	Instance  pluginapi.Instance `json:"instance"`
	// Console is what ConsoleOutput answers (SetConsoleOutput).
	Console string `json:"console,omitempty"`
}

// stateFileContents is the JSON written to a state file.
type stateFileContents struct {
	NextID     int       `json:"nextID"`
	Instances  []*record `json:"instances"`
	Ended      []*record `json:"ended,omitempty"`
	NextVolume int       `json:"nextVolume,omitempty"`
	Volumes    []*volume `json:"volumes,omitempty"`
}

// subscriber receives the events of one cluster.
type subscriber struct {
	clusterID string
	events    chan pluginapi.Event
}

// NewStore returns an empty simulated cloud.
func NewStore() *Store {
	return &Store{
		nextID:    1,
		instances: map[string]*record{},
		cells:     map[string]*record{},
		ended:     map[string]*record{},
		pending:   map[*record]bool{},
		subs:      map[*subscriber]bool{},

		volumes:     map[string]*volume{},
		attachLimit: DefaultAttachmentLimit,
	}
}

// Instances returns every instance in the store, of every cluster, sorted by
// ID. Tests use it to see the cloud as it is, beside what List answers.
func (s *Store) Instances() []pluginapi.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]pluginapi.Instance, 0, len(s.instances))
	for _, r := range s.instances {
		out = append(out, copyInstance(r.Instance))
	}
	sortInstances(out)
	return out
}

// SetState simulates the cloud moving an instance to state (a crash, a spot
// reclaim, a stop) with reason, and emits the matching event. Setting
// StateRunning gives the instance a private address if it had none. It
// returns a NotFoundError for an unknown ID.
func (s *Store) SetState(id string, state pluginapi.InstanceState, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.instances[id]
	if !ok {
		return pluginapi.NewNotFound("instance %s", id)
	}
	s.setStateLocked(r, state, reason, time.Now())
	return s.persistLocked()
}

// SetConsoleOutput sets what ConsoleOutput answers for an instance. It
// returns a NotFoundError for an unknown ID.
func (s *Store) SetConsoleOutput(id, output string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.instances[id]
	if !ok {
		return pluginapi.NewNotFound("instance %s", id)
	}
	r.Console = output
	return s.persistLocked()
}

// Notify simulates a notice from the cloud about an instance: a spot
// interruption, a rebalance recommendation or scheduled maintenance
// (typ), with reason and deadline, sent to WatchEvents subscribers. It
// changes nothing about the instance: follow it with SetState to reclaim
// it. It returns a NotFoundError for an unknown ID.
func (s *Store) Notify(id string, typ pluginapi.EventType, reason string, deadline time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.instances[id]
	if !ok {
		return pluginapi.NewNotFound("instance %s", id)
	}
	s.sendLocked(r.ClusterID, pluginapi.Event{
		Type: typ, InstanceID: r.Instance.ID, CellID: r.Instance.CellID, State: r.Instance.State,
		Reason: reason, Time: time.Now(), Deadline: deadline,
	})
	return nil
}

// attachStateFile makes the store persist itself to path and loads what
// path holds (instances the store already has keep their current value).
// A missing file is an empty store.
func (s *Store) attachStateFile(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateFile = path
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading fake state file: %w", err)
	}
	var contents stateFileContents
	if err := json.Unmarshal(data, &contents); err != nil {
		return fmt.Errorf("loading fake state file %s: %w", path, err)
	}
	if contents.NextID > s.nextID {
		s.nextID = contents.NextID
	}
	for _, r := range contents.Instances {
		if r == nil || r.Instance.ID == "" {
			continue
		}
		if _, ok := s.instances[r.Instance.ID]; !ok {
			s.addLocked(r)
		}
	}
	for _, r := range contents.Ended {
		if r != nil && r.Instance.ID != "" {
			s.ended[cellKey(r.ClusterID, r.Instance.CellID)] = r
		}
	}
	if contents.NextVolume > s.nextVolume {
		s.nextVolume = contents.NextVolume
	}
	for _, v := range contents.Volumes {
		if v == nil || v.Handle == "" {
			continue
		}
		if _, ok := s.volumes[v.Handle]; !ok {
			s.volumes[v.Handle] = v
		}
	}
	return nil
}

// persistLocked writes the store to its state file, if it has one, by
// writing a temporary file and renaming it, so that a kill -9 leaves either
// the old or the new state.
func (s *Store) persistLocked() error {
	if s.stateFile == "" {
		return nil
	}
	contents := stateFileContents{NextID: s.nextID, Instances: make([]*record, 0, len(s.instances))}
	for _, r := range s.instances {
		contents.Instances = append(contents.Instances, r)
	}
	for _, r := range s.ended {
		contents.Ended = append(contents.Ended, r)
	}
	for _, rs := range [][]*record{contents.Instances, contents.Ended} {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Instance.ID < rs[j].Instance.ID })
	}
	contents.NextVolume = s.nextVolume
	for _, v := range s.volumes {
		contents.Volumes = append(contents.Volumes, v)
	}
	sort.Slice(contents.Volumes, func(i, j int) bool { return contents.Volumes[i].Handle < contents.Volumes[j].Handle })
	data, err := json.MarshalIndent(contents, "", "  ")
	if err != nil {
		return fmt.Errorf("persisting fake state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.stateFile), filepath.Base(s.stateFile)+".tmp-*")
	if err != nil {
		return fmt.Errorf("persisting fake state: %w", err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("persisting fake state to %s: %w", s.stateFile, err)
	}
	if err := os.Rename(tmp.Name(), s.stateFile); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("persisting fake state to %s: %w", s.stateFile, err)
	}
	return nil
}

// newIDLocked returns a fresh instance ID and its sequence number.
func (s *Store) newIDLocked() (string, int) {
	n := s.nextID
	s.nextID++
	return fmt.Sprintf("i-%08d", n), n
}

func cellKey(clusterID, cellID string) string { return clusterID + "/" + cellID }

// addLocked indexes a new instance.
func (s *Store) addLocked(r *record) {
	s.instances[r.Instance.ID] = r
	s.cells[cellKey(r.ClusterID, r.Instance.CellID)] = r
	if r.Instance.State == pluginapi.StatePending {
		s.pending[r] = true
	}
}

// removeLocked forgets an instance.
func (s *Store) removeLocked(r *record) {
	delete(s.instances, r.Instance.ID)
	delete(s.cells, cellKey(r.ClusterID, r.Instance.CellID))
	delete(s.pending, r)
}

// findCellLocked returns the instance of cell in cluster, if one exists.
func (s *Store) findCellLocked(clusterID, cellID string) *record {
	return s.cells[cellKey(clusterID, cellID)]
}

// advanceLocked moves every pending instance whose boot delay has passed to
// running.
func (s *Store) advanceLocked(now time.Time) (changed bool) {
	for r := range s.pending {
		if r.Instance.State == pluginapi.StatePending && !now.Before(r.ReadyAt) {
			s.setStateLocked(r, pluginapi.StateRunning, "", now)
			changed = true
		}
	}
	return changed
}

// advance is advanceLocked with the lock, persisting any change.
func (s *Store) advance(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.advanceLocked(now) {
		return s.persistLocked()
	}
	return nil
}

func (s *Store) setStateLocked(r *record, state pluginapi.InstanceState, reason string, now time.Time) {
	r.Instance.State = state
	if state != pluginapi.StatePending {
		delete(s.pending, r)
	}
	if state == pluginapi.StateTerminated {
		s.detachAllLocked(r.Instance.ID)
	}
	r.Instance.StateReason = reason
	if state == pluginapi.StateRunning && r.Instance.PrivateAddress() == "" {
		r.Instance.Addresses = append(r.Instance.Addresses,
			pluginapi.Address{Type: pluginapi.AddressPrivate, Address: addressFor(r.Instance.ID)},
			pluginapi.Address{Type: pluginapi.AddressPod, Address: podAddressFor(r.Instance.ID)},
		)
	}
	s.emitLocked(r, now)
}

// emitLocked sends a state-change event for r to the subscribers of its
// cluster. Events are hints: a subscriber that does not keep up loses them.
func (s *Store) emitLocked(r *record, now time.Time) {
	s.sendLocked(r.ClusterID, pluginapi.Event{
		Type:       pluginapi.EventStateChange,
		InstanceID: r.Instance.ID,
		CellID:     r.Instance.CellID,
		State:      r.Instance.State,
		Reason:     r.Instance.StateReason,
		Time:       now,
	})
}

// sendLocked sends e to the subscribers of clusterID; one that does not
// keep up loses it.
func (s *Store) sendLocked(clusterID string, e pluginapi.Event) {
	for sub := range s.subs {
		if sub.clusterID != clusterID {
			continue
		}
		select {
		case sub.events <- e:
		default:
		}
	}
}

func (s *Store) subscribe(clusterID string) *subscriber {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := &subscriber{clusterID: clusterID, events: make(chan pluginapi.Event, 1024)}
	s.subs[sub] = true
	return sub
}

func (s *Store) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
}

// addressFor derives a stable private address from an instance ID.
func addressFor(id string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "i-"))
	return fmt.Sprintf("10.%d.%d.%d", 64+(n>>16)&63, (n>>8)&255, n&255)
}

// podAddressFor is the address of the pod of instance id
// (pluginapi.AddressPod), as a cloud's secondary address.
func podAddressFor(id string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "i-"))
	return fmt.Sprintf("10.%d.%d.%d", 128+(n>>16)&63, (n>>8)&255, n&255)
}

func copyInstance(in pluginapi.Instance) pluginapi.Instance {
	out := in
	if in.Addresses != nil {
		out.Addresses = append([]pluginapi.Address(nil), in.Addresses...)
	}
	if in.Tags != nil {
		out.Tags = make(map[string]string, len(in.Tags))
		for k, v := range in.Tags {
			out.Tags[k] = v
		}
	}
	return out
}

func sortInstances(insts []pluginapi.Instance) {
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
}
