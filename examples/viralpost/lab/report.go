package lab

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteTable prints the run as tables: the write load per strategy, then
// the read side.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s %s (%s), %s\n", r.Server.Product, r.Server.Version, r.Server.Durability, r.Machine)
	fmt.Fprintf(w, "%.0f likes/s offered for %s per strategy, pool %d, request timeout %s; lock waits >= %s from: %s; sampled %s\n\n",
		r.Rate, r.Duration, r.Pool, r.Timeout, r.Threshold, r.Server.LockWaitLog, r.Server.Sampled)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tlikes/s\tp50 ms\tp99 ms\tmax ms\ttimed out\tunrelated p50/p99 ms\tunrelated timed out\twaits logged\twaits sampled (>=thr)\tdeadlocks\tacked\tcounted\tlost\t")
	for _, s := range r.Strategies {
		logged := "n/a"
		if s.LockWaits.Logged >= 0 {
			logged = fmt.Sprint(s.LockWaits.Logged)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.0f\t%d\t%.1f / %.1f\t%d\t%s\t%d (%d)\t%d\t%d\t%d\t%d\t\n",
			s.Name, s.Achieved, s.Likes.P50, s.Likes.P99, s.Likes.Max, s.TimedOut,
			s.Unrelated.P50, s.Unrelated.P99, s.Unrelated.TimedOut, logged,
			s.LockWaits.Sampled, s.LockWaits.SampledOver, s.Deadlocks, s.Acked, s.Counted, s.Lost)
	}
	tw.Flush()
	for _, s := range r.Strategies {
		if s.LockWaits.Logged < 0 && s.LockWaits.LogNote != "" {
			fmt.Fprintf(w, "%s: logged waits not counted: %s\n", s.Name, s.LockWaits.LogNote)
		}
		if s.LockWaits.RowLockWaits > 0 {
			fmt.Fprintf(w, "%s: the server counted %d row lock waits (Innodb_row_lock_waits, any duration)\n", s.Name, s.LockWaits.RowLockWaits)
		}
		if len(s.LockWaits.LoggedRelations) > 0 {
			fmt.Fprintf(w, "%s: logged waits by relation: %v\n", s.Name, s.LockWaits.LoggedRelations)
		}
		if len(s.Errors) > 0 {
			fmt.Fprintf(w, "%s: %d failed: %s\n", s.Name, s.Failed, strings.Join(s.Errors, "; "))
		}
	}
	for _, sk := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", sk)
	}
	fmt.Fprintln(w, "\nhot rows: what hotcounter detect named during each load, and the library's hot keys")
	for _, s := range r.Strategies {
		switch {
		case s.DetectErr != "":
			fmt.Fprintf(w, "%s: detect could not run: %s\n", s.Name, s.DetectErr)
		case len(s.Detected) == 0:
			fmt.Fprintf(w, "%s: detect found no hot row\n", s.Name)
		}
		for _, d := range s.Detected {
			fmt.Fprintf(w, "%s: detect named %s key %s: %d sessions, %.1fs waiting, %.1f writers at once -> %d slots\n",
				s.Name, d.Table, d.Key, d.Sessions, d.WaitSeconds, d.MeanWriters, d.Slots)
		}
		for _, k := range s.HotKeys {
			kind := "counter"
			if !k.Counter {
				kind = "plain column"
			}
			fmt.Fprintf(w, "%s: hot key %s.%s %s: %d increments, %.0f/s (%s)\n", s.Name, k.Table, k.Column, k.Key, k.Count, k.Rate, kind)
		}
	}
	if len(r.Reads) == 0 {
		return
	}
	fmt.Fprintln(w, "\nreads (one goroutine; median of alternating rounds)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "posts\tload\tµs/load\tvs plain\t")
	for _, rr := range r.Reads {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1fx\t\n", rr.Posts, rr.Variant, rr.Micros, rr.VsPlain)
	}
	tw.Flush()
}

// WriteJSON writes the whole result, timelines included, to path.
func (r *Result) WriteJSON(path string) error { return writeJSON(path, r) }

// WriteJSON writes the flash sale's result as indented JSON.
func (r *FlashSaleResult) WriteJSON(path string) error { return writeJSON(path, r) }

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// palette colours the strategies in the chart, the naive one red.
var palette = []color.Color{
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 140, G: 86, B: 75, A: 255},
}

// WriteChart draws latency over time per strategy (p99 solid, p50 dashed,
// log scale) above the likes acknowledged per second, and saves it as PNG.
func (r *Result) WriteChart(path string) error {
	lat, thr := plot.New(), plot.New()
	lat.Title.Text = fmt.Sprintf("Viral post: %.0f likes/s offered, pool %d, %s %s", r.Rate, r.Pool, r.Server.Product, r.Server.Version)
	lat.Y.Label.Text = "like latency, ms (p99 solid, p50 dashed)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.X.Label.Text = "seconds into the load"
	lat.Legend.Top, lat.Legend.Left = true, true
	thr.Y.Label.Text = "likes acknowledged per second"
	thr.X.Label.Text = "seconds into the load (by arrival)"
	thr.Y.Min = 0
	for i, s := range r.Strategies {
		c := palette[i%len(palette)]
		p99, p50, acked := make(plotter.XYs, 0), make(plotter.XYs, 0), make(plotter.XYs, 0)
		for _, sec := range s.Timeline {
			x := sec.At
			p99 = append(p99, plotter.XY{X: x, Y: max(sec.P99, 0.1)})
			p50 = append(p50, plotter.XY{X: x, Y: max(sec.P50, 0.1)})
			acked = append(acked, plotter.XY{X: x, Y: sec.AckedPer})
		}
		if len(p99) == 0 {
			continue
		}
		l99, err := plotter.NewLine(p99)
		if err != nil {
			return err
		}
		l99.Color, l99.Width = c, vg.Points(2)
		l50, err := plotter.NewLine(p50)
		if err != nil {
			return err
		}
		l50.Color, l50.Width, l50.Dashes = c, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
		la, err := plotter.NewLine(acked)
		if err != nil {
			return err
		}
		la.Color, la.Width = c, vg.Points(2)
		lat.Add(l99, l50)
		thr.Add(la)
		lat.Legend.Add(s.Name, l99)
	}
	lat.Add(plotter.NewGrid())
	thr.Add(plotter.NewGrid())
	const w, h = 9 * vg.Inch, 8 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(12)}
	plots := [][]*plot.Plot{{lat}, {thr}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
