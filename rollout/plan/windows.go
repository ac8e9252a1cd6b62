package plan

import (
	"fmt"
	"strings"
	"sync"
	"time"
	// The zones of spec.windows must resolve in a container without
	// /usr/share/zoneinfo.
	_ "time/tzdata"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// weekdays maps v1alpha1.Weekday names to time.Weekday.
var weekdays = map[v1alpha1.Weekday]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// zones caches time.LoadLocation, which reads the zone database each call.
var zones sync.Map // name -> *time.Location

func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

// window is a MaintenanceWindow, parsed.
type window struct {
	days       [7]bool
	start, end int // minutes of the day
	loc        *time.Location
	text       string
}

func parseClock(s string) (int, bool) {
	var h, m int
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// parseWindows checks spec.windows: the error names the field.
func parseWindows(ws []v1alpha1.MaintenanceWindow) ([]window, error) {
	out := make([]window, 0, len(ws))
	for i, w := range ws {
		var p window
		var ok bool
		if p.start, ok = parseClock(w.Start); !ok {
			return nil, fmt.Errorf("spec.windows[%d].start %q: want HH:MM (00:00 to 23:59)", i, w.Start)
		}
		if p.end, ok = parseClock(w.End); !ok {
			return nil, fmt.Errorf("spec.windows[%d].end %q: want HH:MM (00:00 to 23:59)", i, w.End)
		}
		loc, err := loadZone(w.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("spec.windows[%d].timeZone %q: not a known IANA time zone (e.g. Europe/Berlin; omit it for UTC)", i, w.TimeZone)
		}
		p.loc = loc
		days := "every day"
		if len(w.Days) == 0 {
			p.days = [7]bool{true, true, true, true, true, true, true}
		} else {
			names := make([]string, 0, len(w.Days))
			for _, d := range w.Days {
				wd, ok := weekdays[d]
				if !ok {
					return nil, fmt.Errorf("spec.windows[%d].days: %q is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun", i, d)
				}
				p.days[wd] = true
				names = append(names, string(d))
			}
			days = strings.Join(names, ",")
		}
		p.text = fmt.Sprintf("%s %s-%s %s", days, w.Start, w.End, loc)
		out = append(out, p)
	}
	return out, nil
}

// occurrence returns the stretch of absolute time the window covers when
// it starts on the local day day (a time in w.loc at 00:00 of that day);
// ok is false when the window does not start on that weekday, or the
// stretch is empty (its hours fall in a skipped daylight saving hour).
func (w *window) occurrence(day time.Time) (from, to time.Time, ok bool) {
	if !w.days[day.Weekday()] {
		return from, to, false
	}
	y, m, d := day.Date()
	from = time.Date(y, m, d, w.start/60, w.start%60, 0, 0, w.loc)
	endDay := d
	if w.end <= w.start {
		endDay++
	}
	to = time.Date(y, m, endDay, w.end/60, w.end%60, 0, 0, w.loc)
	return from, to, to.After(from)
}

// WindowState says where a time stands against a rollout's
// spec.windows.
type WindowState struct {
	// Open is whether a window is open.
	Open bool
	// Until is when the open windows close (the latest end of those
	// open).
	Until time.Time
	// Next is when the next window opens, once none is open; zero when
	// none opens within eight days.
	Next time.Time
	// NextWindow describes that window ("Sat,Sun 22:00-04:00 UTC").
	NextWindow string
}

// Windows evaluates spec.windows at now; the error names the field that
// does not parse (an unknown time zone, a malformed time).
func Windows(spec []v1alpha1.MaintenanceWindow, now time.Time) (WindowState, error) {
	ws, err := parseWindows(spec)
	if err != nil {
		return WindowState{}, err
	}
	return evalWindows(ws, now), nil
}

func evalWindows(ws []window, now time.Time) WindowState {
	var st WindowState
	for i := range ws {
		w := &ws[i]
		local := now.In(w.loc)
		y, m, d := local.Date()
		for off := -1; off <= 8; off++ {
			day := time.Date(y, m, d+off, 0, 0, 0, 0, w.loc)
			from, to, ok := w.occurrence(day)
			if !ok {
				continue
			}
			switch {
			case !now.Before(from) && now.Before(to):
				st.Open = true
				if to.After(st.Until) {
					st.Until = to
				}
			case from.After(now) && (st.Next.IsZero() || from.Before(st.Next)):
				st.Next, st.NextWindow = from, w.text
			}
		}
	}
	return st
}

// outsideWindows keeps the rollout from assigning while no window of
// spec.windows is open: Paused, naming the next window, planned again
// when it opens. While a window is open it asks to be planned again when
// it closes, so the phase says so. It reports whether the rollout waits.
func (p *planner) outsideWindows(step int32) bool {
	p.st.NextWindow = nil
	if len(p.r.Spec.Windows) == 0 {
		return false
	}
	st, err := Windows(p.r.Spec.Windows, p.in.Now)
	if err != nil {
		msg := fmt.Sprintf("waiting at step %d: %v", step, err)
		if p.st.Message != msg {
			p.event(true, "InvalidWindow", "%s", msg)
		}
		p.setPhase(v1alpha1.PhasePaused, msg)
		return true
	}
	if st.Open {
		if !st.Until.IsZero() {
			p.requeue(st.Until.Sub(p.in.Now))
		}
		return false
	}
	msg := fmt.Sprintf("waiting at step %d outside the maintenance windows: none opens within 8 days", step)
	if !st.Next.IsZero() {
		next := metav1.NewTime(st.Next)
		p.st.NextWindow = &next
		p.requeue(st.Next.Sub(p.in.Now))
		msg = fmt.Sprintf("waiting at step %d outside the maintenance windows: the next opens at %s (%s)",
			step, st.Next.UTC().Format(time.RFC3339), st.NextWindow)
	}
	if p.st.Phase != v1alpha1.PhasePaused || !strings.HasPrefix(p.st.Message, fmt.Sprintf("waiting at step %d outside", step)) {
		p.event(false, "OutsideWindow", "%s", msg)
	}
	p.setPhase(v1alpha1.PhasePaused, msg)
	return true
}
