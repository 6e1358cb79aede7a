// a component (
export function Note(props: { text: string }) {
  return (
    <div className="note">
      {/* a comment [ */}
      <b>{props.text}</b>
    </div>
  );
}
