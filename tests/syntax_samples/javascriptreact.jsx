// a component (
function App() {
  const label = "click (here";
  return <button onClick={() => go('x')}>{label}</button>;
}
