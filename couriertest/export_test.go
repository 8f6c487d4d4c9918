package couriertest

// SetOnHold makes s call fn when a Delay hold starts (ended false) and when
// it ends (ended true). Call it between NewUnstartedServer and Start.
func SetOnHold(s *Server, fn func(ended bool)) { s.onHold = fn }
