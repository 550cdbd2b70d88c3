package bmcsim

import (
	"fmt"
	"strings"
	"time"
)

// The TaskService: the tasks of firmware updates (update.go), and on a Dell the jobs of the OEM
// import action too (dell_oem.go). A task's state is read from the clock, so a test that sets
// Options.UpdateDuration short runs fast: New for the first tenth of the duration, Running
// (PercentComplete rising) until it ends, then Completed, or Exception from the moment its
// failure shows. A Dell's update that a host reset must activate (BIOS, NIC) is Pending (its
// job Scheduled) from its end until that reset, and Completed then, as iDRAC's are.

const (
	taskServicePath = "/redfish/v1/TaskService"
	// tasksPath is in dell_oem.go.
	dellJobsTail = "/Jobs"
)

// updateTask is one update's task. Its outcome is decided when it is made (newUpdateTask);
// the clock reveals it. Guarded by m.mu.
type updateTask struct {
	num                int    // its number: the Id's, or the JID's on a Dell
	id, name           string // Id ("3", "JID_000000000003") and Name ("Firmware Update: BIOS")
	start, due         time.Time
	failure, failureID string    // why it ends in Exception ("" if it does not), and the message's Id
	failAt             time.Time // when the failure shows
	component, version string    // what the image said
	targets            []updateTarget
	settled            bool      // its effects are in the model (settleUpdates)
	awaiting           int       // staged pieces of firmware no host reset has activated yet
	doneAt             time.Time // when the last of them was activated or superseded
}

// activated and superseded count one staged piece of firmware done: activated by a reset, or
// replaced by a later update's before one.
func (t *updateTask) activated(now time.Time) {
	if t.awaiting--; t.awaiting == 0 {
		t.doneAt = now
	}
}

func (t *updateTask) superseded(now time.Time) { t.activated(now) }

// staged says whether the update waits for a host reset: its targets are a host's firmware.
func (t *updateTask) staged() bool {
	for _, tg := range t.targets {
		if tg.sys != nil {
			return true
		}
	}
	return false
}

// taskView is a task as the clock shows it.
type taskView struct {
	state    string // TaskState
	percent  int
	end      time.Time // zero while it runs
	messages []obj
}

func message(id, text, severity string, args ...string) obj {
	if args == nil {
		args = []string{}
	}
	return obj{"@odata.type": "#Message.v1_1_1.Message", "MessageId": id, "Message": text, "MessageArgs": args, "Severity": severity}
}

// view computes a task's state at now; the caller holds m.mu and has settled the updates.
func (m *model) view(t *updateTask, now time.Time) taskView {
	d := t.due.Sub(t.start)
	percentAt := func(at time.Time) int {
		if d <= 0 {
			return 100
		}
		return min(max(int(at.Sub(t.start)*100/d), 0), 100)
	}
	started := message("TaskEvent.1.0.TaskStarted", fmt.Sprintf("The task with Id '%s' has started.", t.id), "OK", t.id)
	image := t.component + " " + t.version
	var targets []string
	for _, tg := range t.targets {
		targets = append(targets, tg.String())
	}
	on := strings.Join(targets, ", ")
	switch {
	case t.failure != "" && !now.Before(t.failAt):
		return taskView{state: "Exception", percent: percentAt(t.failAt), end: t.failAt, messages: []obj{started,
			message("TaskEvent.1.0.TaskAborted", fmt.Sprintf("The task with Id '%s' has been aborted.", t.id), "Critical", t.id),
			message(or(t.failureID, msgApplyFailed), t.failure, "Critical")}}
	case now.Before(t.start.Add(d / 10)):
		return taskView{state: "New", messages: []obj{}}
	case now.Before(t.due):
		return taskView{state: "Running", percent: min(max(percentAt(now), 1), 99), messages: []obj{started}}
	}
	completed := message("TaskEvent.1.0.TaskCompletedOK", fmt.Sprintf("The task with Id '%s' has completed.", t.id), "OK", t.id)
	successful := message("Update.1.0.UpdateSuccessful", fmt.Sprintf("Device '%s' successfully updated with image '%s'.", on, image), "OK", on, image)
	switch {
	case !t.staged():
		return taskView{state: "Completed", percent: 100, end: t.due, messages: []obj{started, completed, successful}}
	case !m.prof.dellJobs:
		return taskView{state: "Completed", percent: 100, end: t.due, messages: []obj{started, completed,
			message("Update.1.0.AwaitToActivate", fmt.Sprintf("Awaiting for an action to proceed with activating image '%s' on '%s': it takes effect at the next reset of the host.", image, on),
				"OK", image, on)}}
	case t.awaiting > 0:
		return taskView{state: "Pending", percent: 100, messages: []obj{started,
			message("Update.1.0.AwaitToActivate", "Task successfully scheduled.", "OK", image, on)}}
	}
	return taskView{state: "Completed", percent: 100, end: t.doneAt, messages: []obj{started, completed, successful}}
}

// jobState is a task's state as a Dell job's JobState.
func jobState(taskState string) string {
	switch taskState {
	case "Pending":
		return "Scheduled"
	case "Exception":
		return "Failed"
	}
	return taskState // New, Running, Completed
}

func timestamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// dellJob is the Dell job fields of a task, at the top of a DellJob resource or under the
// Task's Oem.Dell.
func dellJob(id, name, jobType string, v taskView) obj {
	last := obj{"Message": "", "MessageId": ""}
	if len(v.messages) > 0 {
		last = v.messages[len(v.messages)-1]
	}
	return obj{
		"Id": id, "Name": name, "JobType": jobType, "JobState": jobState(v.state),
		"PercentComplete": v.percent, "Message": last["Message"], "MessageId": last["MessageId"],
		"CompletionTime": timestamp(v.end),
	}
}

// taskBody renders an update's Task; the caller holds m.mu.
func (m *model) taskBody(t *updateTask, now time.Time) obj {
	m.settleUpdates(now) // what the task shows is in effect when it shows it
	v := m.view(t, now)
	r := m.resource(tasksPath+"/"+t.id, "#Task.v1_7_0.Task", t.id, t.name)
	r["TaskState"] = v.state
	r["PercentComplete"] = v.percent
	r["TaskStatus"] = "OK"
	if v.state == "Exception" {
		r["TaskStatus"] = "Critical"
	}
	r["StartTime"] = timestamp(t.start)
	if !v.end.IsZero() {
		r["EndTime"] = timestamp(v.end)
	}
	r["Messages"] = v.messages
	r["HidePayload"] = true
	if m.prof.dellJobs {
		job := dellJob(t.id, t.name, "FirmwareUpdate", v)
		job["@odata.type"] = "#DellJob.v1_5_0.DellJob"
		r["Oem"] = obj{"Dell": job}
	}
	return r
}

// jobBody renders an update's Dell job (Managers/<iDRAC>/Jobs/<JID>); the caller holds m.mu.
func (m *model) jobBody(t *updateTask, now time.Time) obj {
	m.settleUpdates(now)
	r := dellJob(t.id, t.name, "FirmwareUpdate", m.view(t, now))
	r["@odata.id"] = m.uri(m.managerPath() + dellJobsTail + "/" + t.id)
	r["@odata.type"] = "#DellJob.v1_5_0.DellJob"
	r["StartTime"] = timestamp(t.start)
	return r
}

// importJobView is an import job (dell_oem.go): complete, as the simulator applies the profile
// at once.
func importJobView() taskView {
	return taskView{state: "Completed", percent: 100, end: time.Now(), messages: []obj{
		message("SYS053", "Successfully imported and applied Server Configuration Profile.", "OK")}}
}

func (m *model) importTaskBody(id string) obj {
	v := importJobView()
	t := m.resource(tasksPath+"/"+id, "#Task.v1_4_3.Task", id, "Import Configuration")
	t["TaskState"] = "Completed"
	t["TaskStatus"] = "OK"
	t["PercentComplete"] = 100
	t["Messages"] = v.messages
	t["Oem"] = obj{"Dell": dellJob(id, "Import Configuration", "ImportConfiguration", v)}
	return t
}

func (m *model) importJobBody(id string) obj {
	r := dellJob(id, "Import Configuration", "ImportConfiguration", importJobView())
	r["@odata.id"] = m.uri(m.managerPath() + dellJobsTail + "/" + id)
	r["@odata.type"] = "#DellJob.v1_5_0.DellJob"
	return r
}

// jobID is the canonical Id of an import job, or "" when id names none; the caller holds m.mu.
func (m *model) importJobID(id string) string {
	var n int
	if _, err := fmt.Sscanf(strings.ToUpper(id), "JID_%d", &n); err != nil {
		return ""
	}
	for _, j := range m.importJobs {
		if j == n {
			return fmt.Sprintf("JID_%012d", n) // the path came lower-cased
		}
	}
	return ""
}

// findUpdate finds an update's task by Id, as the router compares Ids; the caller holds m.mu.
func (m *model) findUpdate(id string) *updateTask {
	for _, t := range m.updates {
		if strings.EqualFold(t.id, id) {
			return t
		}
	}
	return nil
}

// taskIDs lists every task's Id: the import jobs', then the updates', each in the order made.
// The caller holds m.mu.
func (m *model) taskIDs() []string {
	var ids []string
	for _, n := range m.importJobs {
		ids = append(ids, fmt.Sprintf("JID_%012d", n))
	}
	for _, t := range m.updates {
		ids = append(ids, t.id)
	}
	return ids
}

func (m *model) taskService(now time.Time) obj {
	ts := m.resource(taskServicePath, "#TaskService.v1_2_0.TaskService", "TaskService", "Task Service")
	ts["ServiceEnabled"] = true
	ts["Status"] = statusOK
	ts["DateTime"] = timestamp(now)
	ts["CompletedTaskOverWritePolicy"] = "Manual"
	ts["LifeCycleEventOnTaskStateChange"] = false
	ts["Tasks"] = m.ref(tasksPath)
	return ts
}

// routeTasks serves the TaskService, its Tasks and each task.
func (b *BMC) routeTasks(rest []string) (endpoint, bool) {
	m := b.model
	switch {
	case len(rest) == 0:
		return endpoint{get: m.locked(func(now time.Time) obj { return m.taskService(now) })}, true
	case rest[0] != "tasks":
	case len(rest) == 1:
		return endpoint{get: m.locked(func(time.Time) obj {
			ids := m.taskIDs()
			paths := make([]string, len(ids))
			for i, id := range ids {
				paths[i] = tasksPath + "/" + id
			}
			return m.collection(tasksPath, "TaskCollection", "Task Collection", paths)
		})}, true
	case len(rest) == 2:
		return m.taskEndpoint(rest[1], m.taskBody, m.importTaskBody)
	}
	return endpoint{}, false
}

// routeJobs serves a Dell's job queue: Managers/<iDRAC>/Jobs and each job.
func (b *BMC) routeJobs(rest []string) (endpoint, bool) {
	m := b.model
	switch len(rest) {
	case 0:
		return endpoint{get: m.locked(func(time.Time) obj {
			ids := m.taskIDs()
			paths := make([]string, len(ids))
			for i, id := range ids {
				paths[i] = m.managerPath() + dellJobsTail + "/" + id
			}
			return m.collection(m.managerPath()+dellJobsTail, "DellJobCollection", "Dell Job Collection", paths)
		})}, true
	case 1:
		return m.taskEndpoint(rest[0], m.jobBody, m.importJobBody)
	}
	return endpoint{}, false
}

// taskEndpoint serves one task or job, rendered by update or imported, or nothing.
func (m *model) taskEndpoint(id string, update func(*updateTask, time.Time) obj, imported func(string) obj) (endpoint, bool) {
	m.mu.Lock()
	t, job := m.findUpdate(id), m.importJobID(id)
	m.mu.Unlock()
	switch {
	case t != nil:
		return endpoint{get: m.locked(func(now time.Time) obj { return update(t, now) })}, true
	case job != "":
		return endpoint{get: m.locked(func(time.Time) obj { return imported(job) })}, true
	}
	return endpoint{}, false
}
